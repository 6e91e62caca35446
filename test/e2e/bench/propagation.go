package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// propagation is how long a change written to the API server takes to show
// in a server's DNS answers.
type propagation struct {
	Server, Label string
	Imports       int
	// ServiceImport and EndpointSlice writes sent, and per second; Seen
	// counts the writes of both kinds answered.
	Writes, ESWrites, Seen, WriteErrors int
	Achieved, ESAchieved                float64
	// Idle and Busy are the server's A-query dnsperf runs alone and while
	// the writes were sent (zero when not measured).
	Idle, Busy perfResult
	// Latencies of the writes seen, from sending one to the first DNS answer
	// that holds the new address; Ack, to the API server's response;
	// AfterAck, from that response to the answer (negative: DNS answered
	// first). Event is from sending to the write's event on a watch the
	// bench opens beside the server's; AfterEvent, from that event to the
	// answer: the DNS server's part, without the API server's commit and its
	// watch delivery.
	P50, P90, P99, Max           time.Duration
	AckP50, AckP99               time.Duration
	AfterAckP50, AfterAckP99     time.Duration
	EventP50, EventP99           time.Duration
	AfterEventP50, AfterEventP99 time.Duration
	// Others is the share of all CPUs' time that other processes took
	// while writing and watching.
	Others float64
}

// writeStream is one kind of write the propagation measurement sends at its
// own rate: target names write k's DNS name and the address it sets, and
// write sends it.
type writeStream struct {
	rate, n int
	target  func(k int) (name, ip string)
	write   func(ctx context.Context, k int, ip string) error
}

// measurePropagation writes for -prop-duration: merge patches of the
// ClusterSetIP of distinct imports at -prop-rate a second and of the churn
// imports' EndpointSlices at -prop-es-rate, and measures for each write the
// time from sending it to the first DNS answer holding the new address
// (harness.AnswerWatcher). during, when not nil, runs while the writes are
// sent (the dnsperf run under load).
func measurePropagation(ctx context.Context, c config, cl *cluster, s *server, during func(context.Context) error) (propagation, error) {
	p := propagation{Server: s.Name, Label: s.Label, Imports: cl.loaded}
	others := newOthersMeter(s.PID())
	streams := propagationStreams(cl, c.propRate, c.propESRate, c.propDuration)
	w := &harness.AnswerWatcher{Addr: s.Addr()}
	ev := &writeEvents{byIP: map[string]int{}, sentAt: map[int]time.Time{}, event: map[int]time.Duration{}}
	wctx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	if err := watchWrites(wctx, cl, ev); err != nil {
		return p, err
	}
	done := make(chan error, 2)
	go func() { done <- w.Run(ctx) }()
	go func() { done <- cond(during == nil, func(context.Context) error { return nil }, during)(ctx) }()
	acks, errs, sendTimes := sendWrites(ctx, streams, w, ev)
	if err := ctx.Err(); err != nil {
		return p, err
	}
	w.Close()
	if err := errors.Join(<-done, <-done); err != nil {
		return p, err
	}
	p.Others = others.share()
	stopEvents()
	p.summarize(streams, sendTimes, acks, w.Seen(), ev.durations())
	p.WriteErrors = len(errs)
	if all := p.Writes + p.ESWrites; len(errs) > all/100 {
		return p, fmt.Errorf("%d of %d writes failed, the first: %w", len(errs), all, errs[0])
	}
	return p, nil
}

// propagationStreams are the ServiceImport writes at rate for d and, with
// esRate, the EndpointSlice writes. Every call has addresses of its own
// (10.150+4r and 10.152+4r for the r-th call on the cluster), so that each
// write changes the answer.
func propagationStreams(cl *cluster, rate, esRate int, d time.Duration) []writeStream {
	r := cl.propRuns
	cl.propRuns++
	// importOf is the import that ServiceImport write k changes: spread over
	// namespaces and names, and distinct for distinct k.
	importOf := func(k int) int { return cond(cl.loaded%7919 == 0, k, (k*7919)%cl.loaded) }
	ip := func(second, k int) string { return fmt.Sprintf("10.%d.%d.%d", second+4*r, (k>>8)&255, k&255) }
	streams := []writeStream{{rate: rate, n: min(int(float64(rate)*d.Seconds()), cl.loaded, 1<<16), // one write per import
		target: func(k int) (string, string) { return cl.fx.name(importOf(k)), ip(150, k) },
		write:  func(ctx context.Context, k int, ip string) error { return cl.setIP(ctx, importOf(k), ip) },
	}}
	if esRate > 0 {
		streams = append(streams, writeStream{rate: esRate, n: min(int(float64(esRate)*d.Seconds()), 1<<16),
			target: func(k int) (string, string) { return churnFQDN(k % churnHeadless), ip(152, k) },
			write:  func(ctx context.Context, k int, ip string) error { return cl.setEndpoint(ctx, k%churnHeadless, ip) },
		})
	}
	return streams
}

// sendWrites sends every stream's writes at its rate, paced by the clock, at
// most 256 at a time, and has w and ev watch each: per write key (stream<<20
// | k) the time the API server took to accept it, the writes' errors, and
// how long each stream took to send.
func sendWrites(ctx context.Context, streams []writeStream, w *harness.AnswerWatcher, ev *writeEvents) (map[int]time.Duration, []error, [2]time.Duration) {
	var (
		mu        sync.Mutex // guards acks and errs
		acks      = map[int]time.Duration{}
		errs      []error
		sendTimes [2]time.Duration
		wg        sync.WaitGroup
		senders   sync.WaitGroup
	)
	sem := make(chan struct{}, 256)
	start := time.Now()
	for si, st := range streams {
		senders.Go(func() {
			for k := range st.n {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(st.rate)))):
				}
				sem <- struct{}{}
				key := si<<20 | k
				name, ip := st.target(k)
				wg.Go(func() {
					defer func() { <-sem }()
					at := time.Now()
					w.Add(key, harness.Write{Name: name, IP: ip, Sent: at})
					ev.add(key, ip, at)
					wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					err := st.write(wctx, k, ip)
					cancel()
					acked := time.Since(at)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						w.Drop(key)
						errs = append(errs, err)
					} else {
						acks[key] = acked
					}
				})
			}
			sendTimes[si] = time.Since(start)
		})
	}
	senders.Wait()
	wg.Wait()
	return acks, errs, sendTimes
}

// summarize fills p's counts and latencies from the writes sent and their
// acks, and the writes seen in DNS and on the bench's watch, by write key.
func (p *propagation) summarize(streams []writeStream, sendTimes [2]time.Duration, acks, seen, event map[int]time.Duration) {
	var all, ack, afterAck, events, afterEvent latencies
	for k, d := range seen {
		all = append(all, d)
		if a, ok := acks[k]; ok {
			afterAck = append(afterAck, d-a)
		}
		if e, ok := event[k]; ok {
			events, afterEvent = append(events, e), append(afterEvent, d-e)
		}
	}
	for _, a := range acks {
		ack = append(ack, a)
	}
	p.Writes, p.Seen = streams[0].n, len(seen)
	p.Achieved = float64(p.Writes) / sendTimes[0].Seconds()
	if len(streams) > 1 {
		p.ESWrites = streams[1].n
		p.ESAchieved = float64(p.ESWrites) / sendTimes[1].Seconds()
	}
	p.P50, p.P90, p.P99, p.Max = all.q(0.50), all.q(0.90), all.q(0.99), all.q(1)
	p.AckP50, p.AckP99 = ack.q(0.50), ack.q(0.99)
	p.AfterAckP50, p.AfterAckP99 = afterAck.q(0.50), afterAck.q(0.99)
	p.EventP50, p.EventP99 = events.q(0.50), events.q(0.99)
	p.AfterEventP50, p.AfterEventP99 = afterEvent.q(0.50), afterEvent.q(0.99)
}

// watchWrites watches, beside the server and until ctx ends, the
// ServiceImports and the churn EndpointSlices that measurePropagation
// writes, from their current resourceVersion on, and tells ev when each
// write's event arrives.
func watchWrites(ctx context.Context, cl *cluster, ev *writeEvents) error {
	for _, res := range []dynamic.ResourceInterface{cl.dyn.Resource(cl.version.gvr()),
		cl.dyn.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(headlessNamespace)} {
		list, err := res.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		wi, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return err
		}
		go func() {
			for we := range wi.ResultChan() {
				if u, ok := we.Object.(*unstructured.Unstructured); ok {
					ev.saw(addresses(u), time.Now()) // when the event arrived, not when it was read
				}
			}
		}()
		context.AfterFunc(ctx, wi.Stop)
	}
	return nil
}

// addresses are an import's IPs or an EndpointSlice's endpoint addresses.
func addresses(u *unstructured.Unstructured) (ips []string) {
	if u.GetKind() == "EndpointSlice" {
		eps, _, _ := unstructured.NestedSlice(u.Object, "endpoints")
		for _, e := range eps {
			if m, ok := e.(map[string]any); ok {
				a, _, _ := unstructured.NestedStringSlice(m, "addresses")
				ips = append(ips, a...)
			}
		}
		return ips
	}
	if im, err := cache.ReadImport(u); err == nil {
		for _, ip := range im.IPs {
			ips = append(ips, ip.String())
		}
	}
	return ips
}

// writeEvents notes, per write, when its event arrived on the bench's watch.
type writeEvents struct {
	mu     sync.Mutex
	byIP   map[string]int        // write by the address it sets
	sentAt map[int]time.Time     // by write: when it was sent
	event  map[int]time.Duration // by write: from sending it to its event
}

func (ev *writeEvents) add(k int, ip string, sent time.Time) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.byIP[ip], ev.sentAt[k] = k, sent
}

// saw notes that the writes setting ips were seen on the watch at t, the
// first time only.
func (ev *writeEvents) saw(ips []string, t time.Time) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, ip := range ips {
		k, ok := ev.byIP[ip]
		if _, done := ev.event[k]; ok && !done {
			ev.event[k] = t.Sub(ev.sentAt[k])
		}
	}
}

func (ev *writeEvents) durations() map[int]time.Duration {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return maps.Clone(ev.event)
}

// latencies are durations to summarize by nearest-rank quantiles.
type latencies []time.Duration

// q is the nearest-rank quantile q of l (q(1) is the largest), 0 when l is
// empty; it sorts l.
func (l latencies) q(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[max(0, min(int(q*float64(len(l))+0.999999)-1, len(l)-1))]
}

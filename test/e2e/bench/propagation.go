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
	// Lat are the writes' latencies by kind: "answer", from sending one to
	// the first DNS answer that holds the new address; "ack", to the API
	// server's response; "after ack", from that response to the answer
	// (negative: DNS answered first); "event", to the write's event on a
	// watch the bench opens beside the server's; "after event", from that
	// event to the answer: the DNS server's part, without the API server's
	// commit and its watch delivery.
	Lat map[string]latencies
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

// sent is what sendWrites did, per write key (stream<<20 | k): when it was
// sent, the address it set, and how long the API server took to accept it;
// and the writes' errors and how long each stream took to send.
type sent struct {
	at        map[int]time.Time
	ip        map[int]string
	ack       map[int]time.Duration
	errs      []error
	sendTimes [2]time.Duration
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
	var events sync.Map // address → when the bench's watch first saw it
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchWrites(wctx, cl, &events); err != nil {
		return p, err
	}
	done := make(chan error, 2)
	go func() { done <- w.Run(ctx) }()
	go func() { done <- cond(during == nil, func(context.Context) error { return nil }, during)(ctx) }()
	out := sendWrites(ctx, streams, w)
	if err := ctx.Err(); err != nil {
		return p, err
	}
	w.Close()
	if err := errors.Join(<-done, <-done); err != nil {
		return p, err
	}
	p.Others = others.share()
	stopWatch()
	event := map[int]time.Duration{}
	for k, ip := range out.ip {
		if t, ok := events.Load(ip); ok {
			event[k] = t.(time.Time).Sub(out.at[k])
		}
	}
	p.summarize(streams, out.sendTimes, out.ack, w.Seen(), event)
	if p.WriteErrors = len(out.errs); p.WriteErrors > (p.Writes+p.ESWrites)/100 {
		return p, fmt.Errorf("%d of %d writes failed, the first: %w", p.WriteErrors, p.Writes+p.ESWrites, out.errs[0])
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

// sendWrites sends every stream's writes at its rate, paced by the clock (a
// late write does not lower the rate), at most 256 at a time, and has w
// watch the answers to each.
func sendWrites(ctx context.Context, streams []writeStream, w *harness.AnswerWatcher) *sent {
	var (
		mu           sync.Mutex // guards out
		out          = &sent{at: map[int]time.Time{}, ip: map[int]string{}, ack: map[int]time.Duration{}}
		wg, senders  sync.WaitGroup
		sem, started = make(chan struct{}, 256), time.Now()
	)
	for si, st := range streams {
		senders.Go(func() {
			for k := range st.n {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(started.Add(time.Duration(k) * time.Second / time.Duration(st.rate)))):
				}
				sem <- struct{}{}
				key := si<<20 | k
				name, ip := st.target(k)
				wg.Go(func() {
					defer func() { <-sem }()
					at := time.Now()
					w.Add(key, harness.Write{Name: name, IP: ip, Sent: at})
					wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					err := st.write(wctx, k, ip)
					cancel()
					acked := time.Since(at)
					mu.Lock()
					defer mu.Unlock()
					if out.at[key], out.ip[key] = at, ip; err != nil {
						w.Drop(key)
						out.errs = append(out.errs, err)
					} else {
						out.ack[key] = acked
					}
				})
			}
			out.sendTimes[si] = time.Since(started)
		})
	}
	senders.Wait()
	wg.Wait()
	return out
}

// summarize fills p's counts and latencies from the writes sent and their
// acks, and the writes seen in DNS and on the bench's watch, by write key.
func (p *propagation) summarize(streams []writeStream, sendTimes [2]time.Duration, acks, seen, event map[int]time.Duration) {
	p.Lat = map[string]latencies{"ack": slices.Collect(maps.Values(acks))}
	for k, d := range seen {
		p.Lat["answer"] = append(p.Lat["answer"], d)
		if a, ok := acks[k]; ok {
			p.Lat["after ack"] = append(p.Lat["after ack"], d-a)
		}
		if e, ok := event[k]; ok {
			p.Lat["event"], p.Lat["after event"] = append(p.Lat["event"], e), append(p.Lat["after event"], d-e)
		}
	}
	p.Writes, p.Seen = streams[0].n, len(seen)
	p.Achieved = float64(p.Writes) / sendTimes[0].Seconds()
	if len(streams) > 1 {
		p.ESWrites = streams[1].n
		p.ESAchieved = float64(p.ESWrites) / sendTimes[1].Seconds()
	}
}

// watchWrites watches, beside the server and until ctx ends, the
// ServiceImports and the churn EndpointSlices that measurePropagation
// writes, from their current resourceVersion on, and notes in events when
// each address first arrived in an event.
func watchWrites(ctx context.Context, cl *cluster, events *sync.Map) error {
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
		context.AfterFunc(ctx, wi.Stop)
		go func() {
			for we := range wi.ResultChan() {
				if u, ok := we.Object.(*unstructured.Unstructured); ok {
					at := time.Now() // when the event arrived, not when it was read
					for _, ip := range addresses(u) {
						events.LoadOrStore(ip, at)
					}
				}
			}
		}()
	}
	return nil
}

// addresses are an import's IPs (at the root in v1alpha2, under spec in
// v1alpha1) or an EndpointSlice's endpoint addresses.
func addresses(u *unstructured.Unstructured) (ips []string) {
	eps, _, _ := unstructured.NestedSlice(u.Object, "endpoints")
	for _, e := range eps {
		if m, ok := e.(map[string]any); ok {
			a, _, _ := unstructured.NestedStringSlice(m, "addresses")
			ips = append(ips, a...)
		}
	}
	root, _, _ := unstructured.NestedStringSlice(u.Object, "ips")
	spec, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ips")
	return slices.Concat(ips, root, spec)
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

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// footprint is a server's start-up cost with a number of imports loaded.
type footprint struct {
	Server  string
	Label   string
	Imports int
	ReadyIn time.Duration
	// Memory right after ready, and after settling.
	AtReady, Settled mem
	// Heap is the Go runtime's heap after settling, from the prometheus
	// plugin (scale servers only).
	Heap goMem
	// Others is the share of all CPUs' time that other processes took
	// from exec to ready (-1: unknown, or not measured).
	Others float64
	// Loaded and LoadedHeap are the memory and the Go heap after LoadedFor
	// of dnsperf A queries over every import (largest number only).
	LoadedFor  time.Duration
	Loaded     mem
	LoadedHeap goMem
	LoadedQPS  float64
}

// propagation is how long a change written to the API server takes to show
// in a server's DNS answers.
type propagation struct {
	Server, Label string
	Imports       int
	Rate          float64 // ServiceImport writes per second asked
	Achieved      float64 // ServiceImport writes per second sent
	Writes, Seen  int     // Seen counts the writes of both kinds answered
	WriteErrors   int
	// EndpointSlice writes, when the run sent them (ESRate > 0), and how
	// many of them were answered.
	ESRate, ESAchieved float64
	ESWrites, ESSeen   int
	// Idle and Busy are the server's A-query dnsperf runs alone and while
	// the writes were sent (zero when not measured).
	Idle, Busy perfResult
	// Seen latencies from sending the write to the first DNS answer that
	// holds the new address; Ack, from sending to the API server's response.
	P50, P90, P99, Max time.Duration
	AckP50, AckP99     time.Duration
	// AfterAck is, per write seen, the time from the API server's response
	// to the first DNS answer with the new address (negative: DNS answered
	// first).
	AfterAckP50, AfterAckP99 time.Duration
	// Event is, per write, the time from sending it to its event on a watch
	// the bench opens beside the server's; AfterEvent, from that event to
	// the first DNS answer with the new address: the DNS server's part,
	// without the API server's commit and its watch delivery.
	EventP50, EventP99           time.Duration
	AfterEventP50, AfterEventP99 time.Duration
	// Others is the share of all CPUs' time that other processes took
	// while writing and watching.
	Others float64
}

// measureFootprint starts a server, checks the last import answers, lets it
// settle and reads its memory and its Go heap; the server is left running.
func measureFootprint(start func() (*server, error), fx fixture, imports int, settle time.Duration) (*server, footprint, error) {
	others := newOthersMeter()
	s, err := start()
	if err != nil {
		return nil, footprint{}, err
	}
	f := footprint{Server: s.Name, Label: s.Label, Imports: imports, ReadyIn: s.ReadyIn, AtReady: s.AtReady, Others: others.share(s.PID())}
	last := fx.name(imports - 1)
	r, err := harness.Exchange(s.Addr(), last, dns.TypeA)
	if err != nil {
		s.Stop()
		return nil, f, fmt.Errorf("%s: %s A: %w", s.Name, last, err)
	}
	if !harness.HasA(r, importIP(imports-1)) {
		s.Stop()
		return nil, f, fmt.Errorf("%s: %s A after ready: want %s, got\n%s", s.Name, last, importIP(imports-1), r)
	}
	time.Sleep(settle)
	var errs [3]error
	f.Settled, errs[0] = s.Memory()
	f.Heap, errs[1] = s.GoMemory()
	f.Heap.Live, errs[2] = s.LiveHeap() // last: it collects garbage
	if err := errors.Join(errs[:]...); err != nil {
		s.Stop()
		return nil, f, fmt.Errorf("%s: %w", s.Name, err)
	}
	return s, f, nil
}

// measureLoaded runs dnsperf on s for o.Duration and reads its memory and
// Go heap afterwards into f: what a server holds once it has answered for a
// while, after its start-up garbage has been collected many times over.
func measureLoaded(ctx context.Context, s *server, m mix, o perfOpts, logPath string, f *footprint) error {
	res, err := runDnsperf(ctx, s, m, o, logPath)
	if err != nil {
		return err
	}
	f.LoadedFor, f.LoadedQPS = o.Duration, res.QPS
	var errs [3]error
	f.Loaded, errs[0] = s.Memory()
	f.LoadedHeap, errs[1] = s.GoMemory()
	f.LoadedHeap.Live, errs[2] = s.LiveHeap()
	return errors.Join(errs[:]...)
}

// writeStream is one kind of write the propagation measurement sends at its
// own rate: target names write k's DNS name and the address it sets, and
// write sends it.
type writeStream struct {
	rate   int
	n      int
	target func(k int) (name, ip string)
	write  func(ctx context.Context, k int, ip string) error
}

// measurePropagation writes at rate per second for d: merge patches of the
// ClusterSetIP of distinct imports and, with esRate, merge patches of the
// churn imports' EndpointSlices at esRate per second, and measures for each
// write the time from sending it to the first DNS answer holding the new
// address (harness.AnswerWatcher: a few questions in flight at a time, a
// name given up after 15 seconds). during, when not nil, runs while the
// writes are sent (the dnsperf run under load).
func measurePropagation(ctx context.Context, c *cluster, s *server, rate, esRate int, d time.Duration, during func(context.Context) error) (propagation, error) {
	p := propagation{Server: s.Name, Label: s.Label, Imports: c.loaded, Rate: float64(rate), ESRate: float64(esRate)}
	others := newOthersMeter(s.PID())
	streams := propagationStreams(c, rate, esRate, d)
	w := &harness.AnswerWatcher{Addr: s.Addr()}
	ev := &writeEvents{byIP: map[string]int{}, sentAt: map[int]time.Time{}, event: map[int]time.Duration{}}
	stopEvents, err := watchWrites(ctx, c, ev)
	if err != nil {
		return p, err
	}
	defer stopEvents()
	watchDone := make(chan error, 1)
	go func() { watchDone <- w.Run(ctx) }()
	duringDone := make(chan error, 1)
	if during != nil {
		go func() { duringDone <- during(ctx) }()
	} else {
		duringDone <- nil
	}
	sent := sendWrites(ctx, streams, w, ev)
	if err := ctx.Err(); err != nil {
		return p, err
	}
	w.Close()
	if err := errors.Join(<-watchDone, <-duringDone); err != nil {
		return p, err
	}
	p.Others = others.share()
	stopEvents()
	p.summarize(streams, sent, w.Seen(), ev.durations())
	if all := p.Writes + p.ESWrites; sent.errs > all/100 {
		return p, fmt.Errorf("%d of %d writes failed, the first: %v", sent.errs, all, sent.firstErr)
	}
	return p, nil
}

// propagationStreams are the ServiceImport writes at rate for d and, with
// esRate, the EndpointSlice writes.
func propagationStreams(c *cluster, rate, esRate int, d time.Duration) []writeStream {
	writes := min(int(float64(rate)*d.Seconds()), c.loaded, 1<<16) // one write per import, so answers cannot be confused
	// importOf is the import that ServiceImport write k changes: spread over
	// namespaces and names, and distinct for distinct k.
	importOf := func(k int) int {
		if c.loaded%7919 == 0 {
			return k
		}
		return (k * 7919) % c.loaded
	}
	streams := []writeStream{{
		rate: rate, n: writes,
		target: func(k int) (string, string) {
			return c.fx.name(importOf(k)), fmt.Sprintf("10.150.%d.%d", (k>>8)&255, k&255)
		},
		write: func(ctx context.Context, k int, ip string) error { return c.setIP(ctx, importOf(k), ip) },
	}}
	if esRate > 0 {
		streams = append(streams, writeStream{
			rate: esRate, n: min(int(float64(esRate)*d.Seconds()), 1<<16),
			target: func(k int) (string, string) {
				return churnFQDN(k % churnHeadless), fmt.Sprintf("10.152.%d.%d", (k>>8)&255, k&255)
			},
			write: func(ctx context.Context, k int, ip string) error { return c.setEndpoint(ctx, k%churnHeadless, ip) },
		})
	}
	return streams
}

// sent is what sendWrites did: per write key (stream<<20 | k) the time the
// API server took to accept it, and how long each stream took to send.
type sent struct {
	ack       map[int]time.Duration
	errs      int
	firstErr  error
	sendTimes [2]time.Duration
}

// sendWrites sends every stream's writes at its rate, at most 256 at a time,
// and has w and ev watch each.
func sendWrites(ctx context.Context, streams []writeStream, w *harness.AnswerWatcher, ev *writeEvents) *sent {
	var (
		mu      sync.Mutex // guards out
		out     = &sent{ack: map[int]time.Duration{}}
		wg      sync.WaitGroup
		senders sync.WaitGroup
	)
	sem := make(chan struct{}, 256)
	start := time.Now()
	for si, st := range streams {
		senders.Go(func() {
			interval := time.Second / time.Duration(st.rate)
			for k := range st.n {
				// Paced by the clock, not a ticker, so that a late write does
				// not lower the rate.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(start.Add(time.Duration(k) * interval))):
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
						out.errs++
						out.firstErr = cmp.Or(out.firstErr, err)
						return
					}
					out.ack[key] = acked
				})
			}
			out.sendTimes[si] = time.Since(start)
		})
	}
	senders.Wait()
	wg.Wait()
	return out
}

// summarize fills p's counts and latencies from what was sent, seen in DNS
// and seen on the bench's watch, by write key.
func (p *propagation) summarize(streams []writeStream, s *sent, seen, event map[int]time.Duration) {
	var all, acks, afterAck, events, afterEvent latencies
	for k, d := range seen {
		all = append(all, d)
		if k>>20 == 1 {
			p.ESSeen++
		}
		if a, ok := s.ack[k]; ok {
			afterAck = append(afterAck, d-a)
		}
		if e, ok := event[k]; ok {
			events = append(events, e)
			afterEvent = append(afterEvent, d-e)
		}
	}
	for _, a := range s.ack {
		acks = append(acks, a)
	}
	p.Writes, p.Seen, p.WriteErrors = streams[0].n, len(seen), s.errs
	p.Achieved = float64(p.Writes) / s.sendTimes[0].Seconds()
	if len(streams) > 1 {
		p.ESWrites = streams[1].n
		p.ESAchieved = float64(p.ESWrites) / s.sendTimes[1].Seconds()
	}
	p.P50, p.P90, p.P99, p.Max = all.q(0.50), all.q(0.90), all.q(0.99), all.q(1)
	p.AckP50, p.AckP99 = acks.q(0.50), acks.q(0.99)
	p.AfterAckP50, p.AfterAckP99 = afterAck.q(0.50), afterAck.q(0.99)
	p.EventP50, p.EventP99 = events.q(0.50), events.q(0.99)
	p.AfterEventP50, p.AfterEventP99 = afterEvent.q(0.50), afterEvent.q(0.99)
}

// watchWrites watches, beside the server, the ServiceImports and
// EndpointSlices that measurePropagation writes, from the current
// resourceVersion on, and tells ev when each write's event arrives. The
// returned func stops the watches.
func watchWrites(ctx context.Context, c *cluster, ev *writeEvents) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var watches []watch.Interface
	stop := sync.OnceFunc(func() {
		cancel()
		for _, wi := range watches {
			wi.Stop()
		}
	})
	si := c.dyn.Resource(c.version.gvr())
	list, err := si.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		stop()
		return nil, err
	}
	sw, err := si.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		stop()
		return nil, err
	}
	watches = append(watches, sw)
	es := c.kube.DiscoveryV1().EndpointSlices(headlessNamespace)
	esList, err := es.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		stop()
		return nil, err
	}
	ew, err := es.Watch(ctx, metav1.ListOptions{ResourceVersion: esList.ResourceVersion})
	if err != nil {
		stop()
		return nil, err
	}
	watches = append(watches, ew)
	go func() {
		for we := range sw.ResultChan() {
			if u, ok := we.Object.(*unstructured.Unstructured); ok {
				seen := time.Now() // when the event arrived, not when it was read
				if im, err := cache.ReadImport(u); err == nil {
					for _, ip := range im.IPs {
						ev.saw(ip.String(), seen)
					}
				}
			}
		}
	}()
	go func() {
		for we := range ew.ResultChan() {
			if slice, ok := we.Object.(*discoveryv1.EndpointSlice); ok {
				for _, e := range slice.Endpoints {
					for _, ip := range e.Addresses {
						ev.saw(ip, time.Now())
					}
				}
			}
		}
	}()
	return stop, nil
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
	ev.byIP[ip] = k
	ev.sentAt[k] = sent
}

// saw notes that the write setting ip was seen on the watch at t, the first
// time only.
func (ev *writeEvents) saw(ip string, t time.Time) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	k, ok := ev.byIP[ip]
	if _, done := ev.event[k]; !ok || done {
		return
	}
	ev.event[k] = t.Sub(ev.sentAt[k])
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
	k := int(q*float64(len(l))+0.999999) - 1
	return l[max(0, min(k, len(l)-1))]
}

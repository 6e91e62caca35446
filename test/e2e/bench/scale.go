package main

import (
	"context"
	"errors"
	"fmt"
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
	if !hasA(r, importIP(imports-1)) {
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

func hasA(r *dns.Msg, ip string) bool {
	if r == nil || r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
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
// address. One watcher asks s, over one UDP socket and one question at a
// time, for every pending name in turn, so that the polling adds at most one
// query in flight to the server's load; a name is given up after 15 seconds.
// during, when not nil, runs while the writes are sent (the dnsperf run
// under load).
func measurePropagation(ctx context.Context, c *cluster, s *server, rate, esRate int, d time.Duration, during func(context.Context) error) (propagation, error) {
	p := propagation{Server: s.Name, Label: s.Label, Imports: c.loaded, Rate: float64(rate), ESRate: float64(esRate)}
	others := newOthersMeter(s.PID())
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
	var (
		mu       sync.Mutex // guards ack, errs, firstErr
		ack      = map[int]time.Duration{}
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	w := &watcher{server: s, waiting: map[int]pendingWrite{}, seen: map[int]time.Duration{}, byIP: map[string]int{}, sentAt: map[int]time.Time{}, event: map[int]time.Duration{}}
	stopEvents, err := watchWrites(ctx, c, w)
	if err != nil {
		return p, err
	}
	defer stopEvents()
	watchDone := make(chan error, 1)
	go func() { watchDone <- w.run(ctx) }()
	duringDone := make(chan error, 1)
	if during != nil {
		go func() { duringDone <- during(ctx) }()
	} else {
		duringDone <- nil
	}

	sem := make(chan struct{}, 256)
	start := time.Now()
	var sendTimes [2]time.Duration
	var senders sync.WaitGroup
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
					sent := time.Now()
					w.add(key, pendingWrite{name: name, ip: ip, sent: sent})
					wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					err := st.write(wctx, k, ip)
					cancel()
					acked := time.Since(sent)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						w.drop(key)
						errs++
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					ack[key] = acked
				})
			}
			sendTimes[si] = time.Since(start)
		})
	}
	senders.Wait()
	if err := ctx.Err(); err != nil {
		return p, err
	}
	wg.Wait()
	w.close()
	if err := <-watchDone; err != nil {
		return p, err
	}
	if err := <-duringDone; err != nil {
		return p, err
	}
	p.Others = others.share()
	stopEvents()
	var seen, acks, afterAck, events, afterEvent []time.Duration
	w.mu.Lock()
	for k, d := range w.seen {
		seen = append(seen, d)
		if k>>20 == 1 {
			p.ESSeen++
		}
		if a, ok := ack[k]; ok {
			afterAck = append(afterAck, d-a)
		}
		if e, ok := w.event[k]; ok {
			events = append(events, e)
			afterEvent = append(afterEvent, d-e)
		}
	}
	w.mu.Unlock()
	for _, a := range ack {
		acks = append(acks, a)
	}
	p.Writes, p.Seen, p.WriteErrors = writes, len(seen), errs
	p.Achieved = float64(writes) / sendTimes[0].Seconds()
	if len(streams) > 1 {
		p.ESWrites = streams[1].n
		p.ESAchieved = float64(streams[1].n) / sendTimes[1].Seconds()
	}
	slices.Sort(seen)
	slices.Sort(acks)
	slices.Sort(afterAck)
	slices.Sort(events)
	slices.Sort(afterEvent)
	p.EventP50, p.EventP99 = percentile(events, 0.50), percentile(events, 0.99)
	p.AfterEventP50, p.AfterEventP99 = percentile(afterEvent, 0.50), percentile(afterEvent, 0.99)
	p.P50, p.P90, p.P99 = percentile(seen, 0.50), percentile(seen, 0.90), percentile(seen, 0.99)
	if len(seen) > 0 {
		p.Max = seen[len(seen)-1]
	}
	p.AckP50, p.AckP99 = percentile(acks, 0.50), percentile(acks, 0.99)
	p.AfterAckP50, p.AfterAckP99 = percentile(afterAck, 0.50), percentile(afterAck, 0.99)
	if all := writes + p.ESWrites; errs > all/100 {
		return p, fmt.Errorf("%d of %d writes failed, the first: %v", errs, all, firstErr)
	}
	return p, nil
}

// watchWrites watches, beside the server, the ServiceImports and
// EndpointSlices that measurePropagation writes, from the current
// resourceVersion on, and tells w when each write's event arrives. The
// returned func stops the watches.
func watchWrites(ctx context.Context, c *cluster, w *watcher) (func(), error) {
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
		for ev := range sw.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				seen := time.Now() // when the event arrived, not when it was read
				if im, err := cache.ReadImport(u); err == nil {
					for _, ip := range im.IPs {
						w.sawEvent(ip.String(), seen)
					}
				}
			}
		}
	}()
	go func() {
		for ev := range ew.ResultChan() {
			if slice, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
				for _, e := range slice.Endpoints {
					for _, ip := range e.Addresses {
						w.sawEvent(ip, time.Now())
					}
				}
			}
		}
	}()
	return stop, nil
}

// pendingWrite is a write whose new address DNS has not answered yet.
type pendingWrite struct {
	name, ip string
	sent     time.Time
}

// watcher asks a server for each pending name in turn, one question at a
// time over one UDP socket, until it answers the new address (the latency
// goes to seen) or 15 seconds have passed.
type watcher struct {
	server *server

	mu      sync.Mutex
	waiting map[int]pendingWrite
	closed  bool                  // no more writes will be added
	seen    map[int]time.Duration // by write
	byIP    map[string]int        // write by the address it sets
	sentAt  map[int]time.Time     // by write: when it was sent
	event   map[int]time.Duration // by write: from sending it to its event on the bench's watch
}

func (w *watcher) add(k int, p pendingWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[k] = p
	w.byIP[p.ip] = k
	w.sentAt[k] = p.sent
}

// sawEvent notes that the write setting ip was seen on the bench's watch at
// t, the first time only.
func (w *watcher) sawEvent(ip string, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok := w.byIP[ip]
	if _, done := w.event[k]; !ok || done {
		return
	}
	w.event[k] = t.Sub(w.sentAt[k])
}

func (w *watcher) drop(k int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, k)
}

func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// watcherSockets is how many questions the watcher has in flight at most,
// one per socket: with one, a server under dnsperf (a few milliseconds per
// answer) would take a second to go over a few hundred pending names, and
// the watcher, not the server, would set the latency measured.
const watcherSockets = 8

// run watches until nothing waits and close was called.
func (w *watcher) run(ctx context.Context) error {
	errs := make(chan error, watcherSockets)
	for i := range watcherSockets {
		go func() { errs <- w.runShare(ctx, i) }()
	}
	var first error
	for range watcherSockets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runShare watches the pending writes k with k % watcherSockets == share,
// over a socket of its own.
func (w *watcher) runShare(ctx context.Context, share int) error {
	cl := &dns.Client{Net: "udp", Timeout: time.Second}
	conn, err := cl.DialContext(ctx, w.server.Addr())
	if err != nil {
		return err
	}
	defer conn.Close()
	for ctx.Err() == nil {
		w.mu.Lock()
		keys := make([]int, 0, len(w.waiting)/watcherSockets+1)
		for k := range w.waiting {
			if k%watcherSockets == share {
				keys = append(keys, k)
			}
		}
		done := w.closed && len(w.waiting) == 0
		w.mu.Unlock()
		if done {
			return nil
		}
		pass := time.Now()
		for _, k := range keys {
			w.mu.Lock()
			p, ok := w.waiting[k]
			w.mu.Unlock()
			if !ok {
				continue
			}
			m := new(dns.Msg)
			m.SetQuestion(p.name, dns.TypeA)
			m.RecursionDesired = false
			r, _, err := cl.ExchangeWithConnContext(ctx, m, conn)
			now := time.Now()
			w.mu.Lock()
			switch {
			case err == nil && hasA(r, p.ip):
				w.seen[k] = now.Sub(p.sent)
				delete(w.waiting, k)
			case now.Sub(p.sent) > 15*time.Second:
				delete(w.waiting, k)
			}
			w.mu.Unlock()
		}
		if rest := time.Millisecond - time.Since(pass); rest > 0 {
			time.Sleep(rest)
		}
	}
	return ctx.Err()
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

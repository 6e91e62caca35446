package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

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
	// first): the DNS server's part, without the API server's latency.
	AfterAckP50, AfterAckP99 time.Duration
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
	r, err := harness.Exchange(s.addr(), last, dns.TypeA)
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
	w := &watcher{server: s, waiting: map[int]pendingWrite{}, seen: map[int]time.Duration{}}
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
	var seen, acks, afterAck []time.Duration
	for k, d := range w.seen {
		seen = append(seen, d)
		if k>>20 == 1 {
			p.ESSeen++
		}
		if a, ok := ack[k]; ok {
			afterAck = append(afterAck, d-a)
		}
	}
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
}

func (w *watcher) add(k int, p pendingWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[k] = p
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

// run watches until nothing waits and close was called.
func (w *watcher) run(ctx context.Context) error {
	cl := &dns.Client{Net: "udp", Timeout: time.Second}
	conn, err := cl.DialContext(ctx, w.server.addr())
	if err != nil {
		return err
	}
	defer conn.Close()
	for ctx.Err() == nil {
		w.mu.Lock()
		keys := make([]int, 0, len(w.waiting))
		for k := range w.waiting {
			keys = append(keys, k)
		}
		done := w.closed && len(keys) == 0
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

package harness

import (
	"cmp"
	"context"
	"maps"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
)

// Write is a write to the API server whose effect DNS should show: the A
// records of Name then hold IP. Sent is when it was sent.
type Write struct {
	Name, IP string
	Sent     time.Time
}

// AnswerWatcher asks a DNS server, for each pending write, for the A records
// of its name until they hold its address: the time from sending the write
// to that answer is how long the write took to show. Questions go out over
// Sockets UDP sockets, one in flight on each, so that watching adds little
// to the server's load; a write not shown within GiveUp is given up.
type AnswerWatcher struct {
	Addr    string
	Sockets int           // 8 when 0
	GiveUp  time.Duration // 15 seconds when 0

	mu      sync.Mutex
	waiting map[int]Write
	seen    map[int]time.Duration
	closed  bool // no more writes will be added
}

// Add watches write k, which must not be watched already.
func (w *AnswerWatcher) Add(k int, wr Write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting, w.seen = map[int]Write{}, map[int]time.Duration{}
	}
	w.waiting[k] = wr
}

// Drop stops watching write k (it failed).
func (w *AnswerWatcher) Drop(k int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, k)
}

// Close says that no more writes will be added: Run returns once the
// pending ones are shown or given up.
func (w *AnswerWatcher) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// Seen is, by write, how long each write shown took to show.
func (w *AnswerWatcher) Seen() map[int]time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// Run watches until Close was called and nothing is pending.
func (w *AnswerWatcher) Run(ctx context.Context) error {
	var g errgroup.Group
	for i, n := 0, cmp.Or(w.Sockets, 8); i < n; i++ {
		g.Go(func() error { return w.runShare(ctx, i, n) })
	}
	return g.Wait()
}

// runShare watches the pending writes k with k % n == share, over a socket
// of its own.
func (w *AnswerWatcher) runShare(ctx context.Context, share, n int) error {
	cl := &dns.Client{Net: "udp", Timeout: time.Second}
	conn, err := cl.DialContext(ctx, w.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	giveUp := cmp.Or(w.GiveUp, 15*time.Second)
	for ctx.Err() == nil {
		w.mu.Lock()
		mine := map[int]Write{}
		for k, p := range w.waiting {
			if k%n == share {
				mine[k] = p
			}
		}
		done := w.closed && len(w.waiting) == 0
		w.mu.Unlock()
		if done {
			return nil
		}
		pass := time.Now()
		for k, p := range mine {
			m := new(dns.Msg)
			m.SetQuestion(p.Name, dns.TypeA)
			m.RecursionDesired = false
			r, _, err := cl.ExchangeWithConnContext(ctx, m, conn)
			now := time.Now()
			w.mu.Lock()
			switch _, still := w.waiting[k]; {
			case still && err == nil && HasA(r, p.IP):
				w.seen[k] = now.Sub(p.Sent)
				delete(w.waiting, k)
			case now.Sub(p.Sent) > giveUp:
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

// HasA says whether r is a NOERROR answer with an A record of ip.
func HasA(r *dns.Msg, ip string) bool {
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

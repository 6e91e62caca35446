package multicluster

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clustersetdns/multicluster/cache"
)

// serialBackend is a synced backend with no services whose serial a test moves.
type serialBackend struct{ serial atomic.Uint32 }

func (*serialBackend) HasSynced() bool                      { return true }
func (*serialBackend) Lookup(string) *cache.Service         { return nil }
func (*serialBackend) LookupIP(netip.Addr) []*cache.Service { return nil }
func (*serialBackend) HasNamespace(string) bool             { return false }
func (b *serialBackend) Serial() uint32                     { return b.serial.Load() }
func (*serialBackend) Each(func(*cache.Service) bool)       {}

// notifyLog records each NOTIFY: when, and the serial it announced.
type notifyLog struct {
	b    *serialBackend
	mu   sync.Mutex
	sent map[string][]notified
}

type notified struct {
	at     time.Time
	serial uint32
}

func (n *notifyLog) Notify(zone string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent[zone] = append(n.sent[zone], notified{time.Now(), n.b.Serial()})
	return nil
}

func (n *notifyLog) of(zone string) []notified {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.sent[zone])
}

// Every zone is notified once synced, then when the serial moves: a change
// after a quiet spell at the next look (notifyCheck), a burst of changes at
// most once a notifyGap, and the last change always. The clock is the
// bubble's (testing/synctest): it moves only when every goroutine waits.
func TestNotifyOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &serialBackend{}
		b.serial.Store(100)
		m := &Multicluster{backend: b}
		zones := []string{"clusterset.local.", "42.10.in-addr.arpa."}
		m.setZones(zones)
		n := &notifyLog{b: b, sent: map[string][]notified{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.notifyOnChange(ctx, n) }()
		defer func() { cancel(); <-done }()
		const zone = "clusterset.local."

		// At start, once per zone, at the first look.
		start := time.Now()
		time.Sleep(notifyCheck)
		synctest.Wait()
		for _, z := range zones {
			if got := n.of(z); len(got) != 1 || got[0].serial != 100 || got[0].at.Sub(start) > notifyCheck {
				t.Fatalf("%s at start: %v, want serial 100 within %v", z, got, notifyCheck)
			}
		}
		// Nothing without a change.
		time.Sleep(10 * notifyGap)
		synctest.Wait()
		if got := n.of(zone); len(got) != 1 {
			t.Fatalf("%d NOTIFYs without a change", len(got))
		}

		// 30 changes 50 ms apart, 1.5 s in all.
		burst := time.Now()
		for range 30 {
			b.serial.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
		last, lastAt := b.Serial(), time.Now().Add(-50*time.Millisecond)
		time.Sleep(notifyGap + notifyCheck)
		synctest.Wait()
		sent := n.of(zone)[1:]
		if len(sent) == 0 {
			t.Fatal("no NOTIFY for 30 changes")
		}
		// The first change, after a quiet spell, at the next look.
		if d := sent[0].at.Sub(burst); d > notifyCheck {
			t.Errorf("the first change was notified after %v, want within %v", d, notifyCheck)
		}
		// At most one a notifyGap.
		for i := 1; i < len(sent); i++ {
			if gap := sent[i].at.Sub(sent[i-1].at); gap < notifyGap {
				t.Errorf("NOTIFYs %v apart, under %v", gap, notifyGap)
			}
		}
		if most := 1 + int(lastAt.Sub(burst)/notifyGap) + 1; len(sent) > most {
			t.Errorf("%d NOTIFYs for 30 changes over %v, want at most %d", len(sent), lastAt.Sub(burst), most)
		}
		// The last change, within a notifyGap and a look of it.
		if final := sent[len(sent)-1]; final.serial != last || final.at.Sub(lastAt) > notifyGap+notifyCheck {
			t.Errorf("last NOTIFY for serial %d, %v after the last change; want serial %d within %v",
				final.serial, final.at.Sub(lastAt), last, notifyGap+notifyCheck)
		}
		for _, z := range zones {
			if got, want := len(n.of(z)), len(sent)+1; got != want {
				t.Errorf("%s: %d NOTIFYs, %s had %d", z, got, zone, want)
			}
		}

		// Nothing more once the last serial was notified.
		before := len(n.of(zone))
		time.Sleep(10 * notifyGap)
		synctest.Wait()
		if after := len(n.of(zone)); after != before {
			t.Errorf("NOTIFYs went on without a change: %d then %d", before, after)
		}
	})
}

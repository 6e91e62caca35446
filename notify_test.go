package multicluster

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
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

type notifyLog struct {
	mu   sync.Mutex
	sent map[string][]time.Time
}

func (n *notifyLog) Notify(zone string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent[zone] = append(n.sent[zone], time.Now())
	return nil
}

func (n *notifyLog) count(zone string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent[zone])
}

// Every zone is notified once synced, then when the serial moves: a burst
// of changes gives at most one NOTIFY a second, and the last change is
// always notified.
func TestNotifyOnChange(t *testing.T) {
	b := &serialBackend{}
	b.serial.Store(100)
	m := &Multicluster{backend: b}
	m.setZones([]string{"clusterset.local.", "42.10.in-addr.arpa."})
	n := &notifyLog{sent: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.notifyOnChange(ctx, n) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, zone string, count int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for n.count(zone) < count {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d NOTIFYs for %s, want %d", what, n.count(zone), zone, count)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("at start", "clusterset.local.", 1)
	waitFor("at start", "42.10.in-addr.arpa.", 1)
	time.Sleep(3 * notifyCheck)
	if c := n.count("clusterset.local."); c != 1 {
		t.Fatalf("%d NOTIFYs without a change", c)
	}
	// 30 changes over 1.5 s, or longer on a loaded machine.
	burst := time.Now()
	for range 30 {
		b.serial.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(burst)
	waitFor("after the burst", "clusterset.local.", 3)
	time.Sleep(notifyGap + 3*notifyCheck)
	n.mu.Lock()
	sent := n.sent["clusterset.local."]
	n.mu.Unlock()
	// One at start, one a second during the burst, one for its last change.
	if most := 3 + int(took/notifyGap); len(sent) > most {
		t.Errorf("%d NOTIFYs for 30 changes in %v, want at most %d", len(sent), took, most)
	}
	for i := 1; i < len(sent); i++ {
		// The times are taken after Notify returns: allow for the call.
		if gap := sent[i].Sub(sent[i-1]); gap < notifyGap-50*time.Millisecond {
			t.Errorf("NOTIFYs %v apart, under %v", gap, notifyGap)
		}
	}
	// Nothing more once the last serial was notified.
	before := n.count("clusterset.local.")
	time.Sleep(notifyGap + 3*notifyCheck)
	if after := n.count("clusterset.local."); after != before {
		t.Errorf("NOTIFYs went on without a change: %d then %d", before, after)
	}
}

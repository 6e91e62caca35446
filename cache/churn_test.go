package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A thousand updates while readers walk the answers: -race must stay quiet,
// and a service that always exists must never be missing.
func TestChurnWhileReading(t *testing.T) {
	e := start(t, true, v2("demo", "stable", "1", "ClusterSetIP", "10.0.0.1"), v1("demo", "stable", "1", ""))
	e.wantAddrs("stable.demo", "10.0.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads, missing atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				for i := range 20 {
					if s := e.c.Lookup(fmt.Sprintf("svc%d.demo", i)); s != nil {
						_ = addrsOf(s)
					}
				}
				if e.c.Lookup("stable.demo") == nil {
					missing.Add(1)
				}
				_ = e.c.Serial()
				_ = e.c.HasNamespace("demo")
				e.c.Each(func(*Service) bool { return true })
				reads.Add(1)
			}
		}()
	}
	e.readsAfter(&reads, 0) // the readers run before the first update
	for i := range 1000 {
		name := fmt.Sprintf("svc%d", i%20)
		rv := fmt.Sprint(i + 10)
		if i%7 == 0 {
			_ = e.dyn.Resource(gvr2).Namespace("demo").Delete(ctx, name, metav1.DeleteOptions{})
			continue
		}
		e.apply(gvr2, v2("demo", name, rv, "ClusterSetIP", fmt.Sprintf("10.1.%d.%d", i/250, i%250)))
		if i%50 == 1 {
			// The fake watch holds 100 events: let the controller catch up.
			e.eventually("caught up", func() error {
				if s := e.c.Lookup(name + ".demo"); s == nil || s.ResourceVersion() != rv {
					return fmt.Errorf("%s not at %s yet", name, rv)
				}
				return nil
			})
		}
	}
	e.apply(gvr2, v2("demo", "svc0", "5000", "ClusterSetIP", "10.9.9.9"))
	e.wantAddrs("svc0.demo", "10.9.9.9")
	e.readsAfter(&reads, reads.Load()) // and after the last
	cancel()
	wg.Wait()
	if missing.Load() > 0 {
		t.Errorf("a stable service was missing %d times", missing.Load())
	}
	t.Logf("%d read rounds during 1000 updates", reads.Load())
}

// readsAfter waits until readers have counted ten more reads than n: they
// read while, or after, whatever came before the call.
func (e *env) readsAfter(reads *atomic.Int64, n int64) {
	e.t.Helper()
	e.eventually("reads", func() error {
		if got := reads.Load(); got < n+10 {
			return fmt.Errorf("%d reads, want %d", got, n+10)
		}
		return nil
	})
}

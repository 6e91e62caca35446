package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// An expired watch (410 Gone) makes the informer list again; no answer may
// go missing in between, and a change made meanwhile shows afterwards.
func TestWatchExpiredRelistsWithoutGap(t *testing.T) {
	var mu sync.Mutex
	var watchers []*watch.RaceFreeFakeWatcher
	var lists atomic.Int32
	objs := []runtime.Object{v2("demo", "web", "1", "ClusterSetIP", "10.0.0.1")}
	e := startWith(t, false, func(env *env) {
		env.dyn.PrependWatchReactor(ServiceImportResource.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			mu.Lock()
			watchers = append(watchers, w)
			mu.Unlock()
			return true, w, nil
		})
		env.dyn.PrependReactor("list", ServiceImportResource.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
			lists.Add(1)
			return false, nil, nil
		})
	}, objs...)
	e.wantAddrs("web.demo", "10.0.0.1")

	ctx, cancel := context.WithCancel(context.Background())
	var missing, reads atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if e.c.Lookup("web.demo") == nil {
				missing.Add(1)
			}
			reads.Add(1)
		}
	}()
	e.readsAfter(&reads, 0) // reading before the watch breaks
	before := lists.Load()
	// Change the object while the watch is broken, then expire the watch.
	if _, err := e.dyn.Resource(gvr2).Namespace("demo").Update(ctx, v2("demo", "web", "2", "ClusterSetIP", "10.0.0.2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	w := watchers[len(watchers)-1]
	mu.Unlock()
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	e.wantAddrs("web.demo", "10.0.0.2")
	if lists.Load() == before {
		t.Error("the informer did not list again after 410 Gone")
	}
	e.readsAfter(&reads, reads.Load()) // and after the relist
	cancel()
	<-done
	if missing.Load() > 0 {
		t.Errorf("web.demo missing in %d of %d reads across the relist", missing.Load(), reads.Load())
	}
	t.Logf("%d reads across the relist, %d lists", reads.Load(), lists.Load())
}

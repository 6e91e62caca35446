package main

import (
	"github.com/clustersetdns/multicluster/test/e2e/harness"

	"context"
	"fmt"
	"sync"
	"time"
)

// replicaStart is what n replicas of one server cost the API server when they
// start together against one control plane: the time until the last is
// ready, and the API server's CPU time and memory meanwhile.
type replicaStart struct {
	Server, Label string
	Replicas      int
	Imports       int
	// AllReady is from starting the first replica until the last is ready.
	AllReady time.Duration
	// APICPU is the kube-apiserver's CPU time over that span, in seconds of
	// one CPU; Wall the span itself.
	APICPU float64
	Wall   time.Duration
	// APIBefore is the kube-apiserver's VmRSS before the start (KiB),
	// APIPeak the highest VmRSS sampled (every 100 ms) until all were ready.
	APIBefore, APIPeak int
	// Err is why the measurement failed (a replica not ready in time).
	Err string
}

// measureReplicas starts n replicas of one server at once, against the one
// control plane cl, waits until every one is ready, and stops them.
func measureReplicas(ctx context.Context, cl *cluster, start starter, name, label string, n int) (replicaStart, error) {
	r := replicaStart{Server: name, Label: label, Replicas: n, Imports: cl.loaded}
	pid, err := cl.env.APIServerPID()
	if err != nil {
		return r, err
	}
	before, err := harness.ProcMemory(pid)
	if err != nil {
		return r, err
	}
	r.APIBefore, r.APIPeak = before.RSS, before.RSS
	cpu0, err := harness.CPUSeconds(pid)
	if err != nil {
		return r, err
	}

	// The API server's memory, sampled until every replica is ready.
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				if m, err := harness.ProcMemory(pid); err == nil {
					r.APIPeak = max(r.APIPeak, m.RSS)
				}
			}
		}
	}()

	t0 := time.Now()
	servers := make([]*server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = start(fmt.Sprintf("-r%02d", i), false) })
	}
	wg.Wait()
	r.AllReady = time.Since(t0)
	close(stopSampling)
	<-sampled
	cpu1, terr := harness.CPUSeconds(pid)
	r.Wall = time.Since(t0)
	for _, s := range servers {
		if s != nil {
			s.Stop()
		}
	}
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	if terr != nil {
		return r, terr
	}
	r.APICPU = cpu1 - cpu0
	return r, ctx.Err()
}

func (r replicaStart) String() string {
	return fmt.Sprintf("%d replicas of %s at %d imports: all ready in %.1fs; kube-apiserver took %.1f CPU-seconds, VmRSS %d MiB before, peak %d MiB (+%d MiB)",
		r.Replicas, r.Server, r.Imports, r.AllReady.Seconds(), r.APICPU, r.APIBefore>>10, r.APIPeak>>10, (r.APIPeak-r.APIBefore)>>10)
}

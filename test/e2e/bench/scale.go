package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// footprint is a server's start-up cost with a number of imports loaded:
// its memory right after ready, -settle later (the Go heap of the scale
// servers only), and after LoadedFor of dnsperf A queries at LoadedQPS
// (largest number only); Others is the share of all CPUs' time that other
// processes took from exec to ready (-1: not measured).
type footprint struct {
	Server, Label      string
	Imports            int
	ReadyIn, LoadedFor time.Duration
	AtReady            mem
	Settled, Loaded    reading
	Others, LoadedQPS  float64
}

// runScale loads each number of -scale-imports in turn, adding to the
// imports already there, and at each starts stock, then ours, one at a time
// and alone: time to ready, memory and Go heap. At the largest number it
// also measures, with each server, its memory after dnsperf, the
// propagation of API writes to its answers, and its replicas started
// together.
func runScale(ctx context.Context, c config, rep *report, fx fixture, sides []side) error {
	for n, size := range c.scaleImports {
		largest := n == len(c.scaleImports)-1
		if err := scaleLoad(ctx, c, rep, size, sides); err != nil {
			return err
		}
		var churnMix mix
		if largest {
			var err error
			if churnMix, err = prepareChurn(ctx, c, fx, size, sides); err != nil {
				return err
			}
		}
		starts := make([]starter, len(sides))
		for k, sd := range sides {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
			starts[k] = func(sfx string, metrics bool) (*server, error) {
				return sd.start(fmt.Sprintf("-%d", size)+sfx, metrics)
			}
			s, err := measureFootprint(ctx, c, rep, starts[k], fx, size, largest, churnMix)
			if err != nil {
				return err
			}
			if !largest {
				continue
			}
			err = measureChurn(ctx, c, rep, sd.cl, s, churnMix)
			if s.Stop(); err != nil {
				return fmt.Errorf("propagation, %s: %w", sd.name, err)
			}
		}
		// The replicas last, after both sides' single servers: a burst of
		// replicas must not precede one side's measurements only.
		for k, sd := range sides {
			if largest && c.replicas > 0 && ctx.Err() == nil {
				waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
				r, err := measureReplicas(ctx, sd.name, sd.cl, starts[k], c.replicas)
				if err != nil { // reported, not fatal: the rest of the run stands
					r.Err = err.Error()
				}
				rep.replicas = append(rep.replicas, r)
				logf("scale: %s", line(r, replicaCols))
			}
		}
	}
	return ctx.Err()
}

// measureFootprint starts a server, checks that the last import answers,
// lets it settle and reads its memory and its Go heap; at the largest
// number, again after -loaded-for of dnsperf, and leaves it running.
func measureFootprint(ctx context.Context, c config, rep *report, start starter, fx fixture, imports int, largest bool, m mix) (*server, error) {
	others := newOthersMeter()
	s, err := start("", true)
	if err != nil {
		return nil, err
	}
	f := footprint{Server: s.Name, Label: s.Label, Imports: imports, ReadyIn: s.ReadyIn, AtReady: s.AtReady, Others: others.share(s.PID())}
	last := fx.name(imports - 1)
	r, err := harness.Exchange(s.Addr(), last, dns.TypeA)
	if err == nil && !harness.HasA(r, importIP(imports-1)) {
		err = fmt.Errorf("want %s, got\n%s", importIP(imports-1), r)
	}
	if err == nil {
		time.Sleep(c.settle)
		f.Settled, err = s.read()
	}
	if err == nil && largest && c.loadedFor > 0 {
		var res perfResult
		if res, err = runDnsperf(ctx, c, c.loadedFor, s, m, "scale-loaded-"+s.Name); err == nil {
			f.LoadedFor, f.LoadedQPS = c.loadedFor, res.QPS
			f.Loaded, err = s.read()
		}
	}
	rep.footprints = append(rep.footprints, f)
	logf("scale: %s", line(f, footprintCols))
	if err != nil || !largest {
		s.Stop()
		return nil, cond(err != nil, fmt.Errorf("%s, %d imports: %w", s.Name, imports, err), nil)
	}
	return s, nil
}

// measureChurn measures the propagation of writes to s's answers, first
// alone (the control planes on both CPUs) and then while dnsperf asks A
// queries (the control planes on dnsperf's CPU, as in the QPS runs), and
// s's A-query throughput alone and during those writes.
func measureChurn(ctx context.Context, c config, rep *report, cl *cluster, s *server, m mix) error {
	ctx, cancel := context.WithTimeout(ctx, 2*c.propDuration+4*time.Minute)
	defer cancel()
	quiet, err := measurePropagation(ctx, c, cl, s, nil)
	if err != nil {
		return err
	}
	rep.props = append(rep.props, quiet)
	logf("scale: %s", line(quiet, propCols))
	if err := pinPlanes(c.loadCPU); err != nil {
		return err
	}
	defer func() { _ = pinPlanes("") }()
	waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
	idle, err := runDnsperf(ctx, c, c.duration, s, m, "scale-idle-"+s.Name)
	if err != nil {
		return err
	}
	var during perfResult
	busy, err := measurePropagation(ctx, c, cl, s, func(ctx context.Context) (err error) {
		during, err = runDnsperf(ctx, c, c.duration, s, m, "scale-writes-"+s.Name)
		return err
	})
	busy.Label += ", during dnsperf"
	busy.Idle, busy.Busy = idle, during
	rep.props = append(rep.props, busy)
	logf("scale: %s", line(busy, rep.churnCols()))
	return err
}

// prepareChurn creates the churn imports in both control planes (for the
// EndpointSlice writes) and the query file of A queries over size imports.
func prepareChurn(ctx context.Context, c config, fx fixture, size int, sides []side) (mix, error) {
	if c.propESRate > 0 {
		if err := parallel(ctx, 2, 2, func(ctx context.Context, k int) error { return sides[k].cl.createChurnHeadless(ctx) }); err != nil {
			return mix{}, fmt.Errorf("churn imports: %w", err)
		}
	}
	dir := filepath.Join(c.out, "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mix{}, err
	}
	mixes, err := writeMixes(dir, fx, size, c.queryLines, c.seed)
	if err != nil {
		return mix{}, err
	}
	return mixes[0], nil
}

// scaleLoad adds imports to both control planes at once until each has size,
// and waits (bounded) for the servers' CPU to be quiet again.
func scaleLoad(ctx context.Context, c config, rep *report, size int, sides []side) error {
	added := size - min(sides[0].cl.loaded, sides[1].cl.loaded)
	if added <= 0 {
		return nil
	}
	// A create takes about 4 ms of CPU here: the bound is generous.
	within := 10*time.Minute + time.Duration(added)*20*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	logf("scale: adding %d ClusterSetIP imports to each control plane (32 clients each; at most %v)", added, within.Round(time.Minute))
	if err := parallel(ctx, 2, 2, func(ctx context.Context, k int) error { return sides[k].cl.createImports(ctx, size, 32) }); err != nil {
		return fmt.Errorf("loading %d imports: %w", size, err)
	}
	took := time.Since(start)
	rep.loads = append(rep.loads, fmt.Sprintf("loading: %d ClusterSetIP imports in each control plane, %d added to each in %.0fs (%.0f per second per plane)",
		size, added, took.Seconds(), float64(added)/took.Seconds()))
	logf("scale: %s", rep.loads[len(rep.loads)-1])
	waitQuiet(ctx, c.serverCPU, c.quiet, 30*time.Second) // the API servers may still be busy
	return nil
}

// replicaStart is what n replicas of one server cost the API server when
// they start together: the time until the last is ready, and the API
// server's CPU seconds and VmRSS (KiB: before, and the highest sampled
// every 100 ms) meanwhile.
type replicaStart struct {
	Label              string
	Replicas, Imports  int
	AllReady           time.Duration
	APICPU             float64
	APIBefore, APIPeak int
	Err                string // why the measurement failed
}

// measureReplicas starts n replicas of one server at once, against the one
// control plane cl, waits until every one is ready, and stops them.
func measureReplicas(ctx context.Context, name string, cl *cluster, start starter, n int) (replicaStart, error) {
	r := replicaStart{Label: name, Replicas: n, Imports: cl.loaded}
	pid, err := cl.env.APIServerPID()
	if err != nil {
		return r, err
	}
	before, err := harness.ProcMemory(pid)
	cpu0, cerr := harness.CPUSeconds(pid)
	if err = errors.Join(err, cerr); err != nil {
		return r, err
	}
	r.APIBefore, r.APIPeak = before.RSS, before.RSS
	t0, servers, errs, ready := time.Now(), make([]*server, n), make([]error, n+2), make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { servers[i], errs[i] = start(fmt.Sprintf("-r%02d", i), false) })
		}
		wg.Wait()
		close(ready)
	}()
	for t := time.NewTicker(100 * time.Millisecond); r.AllReady == 0; {
		select {
		case <-ready:
			r.AllReady = time.Since(t0)
			t.Stop()
		case <-t.C:
			if m, err := harness.ProcMemory(pid); err == nil {
				r.APIPeak = max(r.APIPeak, m.RSS)
			}
		}
	}
	var cpu1 float64
	cpu1, errs[n] = harness.CPUSeconds(pid)
	r.APICPU, errs[n+1] = cpu1-cpu0, ctx.Err()
	for _, s := range servers {
		if s != nil {
			s.Stop()
		}
	}
	return r, errors.Join(errs...)
}

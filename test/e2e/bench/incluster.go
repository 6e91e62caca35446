package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// inCluster is -in-cluster at one number of imports: the cost that the MCS
// stanza adds to the cluster's own CoreDNS, stock's multicluster option
// against ours. Each of four servers, one at a time, serves cluster.local
// with the kubernetes plugin, from stock's control plane (the spec/status
// shape, as most clusters hold it): stock's and ours' binary alone (the
// bases), stock's with the option, and ours with our stanza. Runs are by
// server, one per -starts round.
type inCluster struct {
	Imports int
	Runs    [4][]inRun // stock, stock + option, ours, ours + stanza
}

// inRun is one server's start: CPU seconds from exec to ready, memory
// after -settle (Live: the Go heap after a GC), and CPU seconds while
// -prop-duration of writes are sent at -prop-rate and -prop-es-rate and for
// 2 s after, with no query.
type inRun struct {
	ReadyCPU, WriteCPU float64
	Settled            reading
}

var inLabels = [4]string{"stock kubernetes", "stock kubernetes + multicluster option", "ours kubernetes", "ours kubernetes + multicluster"}

// inClusterServers are the four servers, on sd's control plane.
func inClusterServers(ctx context.Context, c config, sd side) ([4]side, error) {
	id, err := sd.cl.env.PluginIdentity(ctx)
	if err != nil {
		return [4]side{}, err
	}
	admin := adminKubeconfig(sd.cl)
	own := kubernetesBlock(admin, false, "cluster.local")
	ours := strings.Replace(harness.MulticlusterBlock(id.Kubeconfig), "multicluster {", "multicluster "+zone+" {", 1) + own
	zones := []string{"cluster.local", zone}
	return [4]side{
		{"stock-k8s", inLabels[0], c.stock, own, sd.cl, zones},
		{"stock-k8s-mc", inLabels[1], c.stock, kubernetesBlock(admin, true, "cluster.local", zone), sd.cl, zones},
		{"ours-k8s", inLabels[2], c.ours, own, sd.cl, zones},
		{"ours-k8s-mc", inLabels[3], c.ours, ours, sd.cl, zones},
	}, nil
}

// measureInCluster runs the four servers -starts times in turn.
func measureInCluster(ctx context.Context, c config, rep *report, servers [4]side, size int) error {
	in := inCluster{Imports: size}
	for round := range max(1, c.starts) {
		for i, s := range servers {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.waitStart(ctx)
			r, err := inClusterRun(ctx, c, s, fmt.Sprintf("-%d-%d", size, round), i%2 == 1)
			if err != nil {
				return fmt.Errorf("in-cluster, %s at %d imports: %w", s.name, size, err)
			}
			in.Runs[i] = append(in.Runs[i], r)
			logf("scale: in-cluster %s, %d imports: to ready %.2f CPU-s, RssAnon %s, live heap %s, writes %.2f CPU-s",
				s.label, size, r.ReadyCPU, mib(r.Settled.Anon), mibBytes(r.Settled.Live.Alloc), r.WriteCPU)
		}
	}
	rep.inCluster = append(rep.inCluster, in)
	return nil
}

func inClusterRun(ctx context.Context, c config, sd side, suffix string, mcs bool) (r inRun, err error) {
	s, err := c.startServer(sd, suffix, true)
	if err != nil {
		return r, err
	}
	defer s.Stop()
	if r.ReadyCPU, err = harness.CPUSeconds(s.PID()); err != nil {
		return r, err
	}
	// The last import answers (the writes may have changed its address).
	if name := sd.cl.fx.name(sd.cl.loaded - 1); mcs {
		if a, err := harness.Exchange(s.Addr(), name, dns.TypeA); err != nil || a.Rcode != dns.RcodeSuccess || len(a.Answer) == 0 {
			return r, fmt.Errorf("want an address for %s at ready, got %v\n%v", name, err, a)
		}
	}
	time.Sleep(c.settle)
	if r.Settled, err = s.read(); err != nil {
		return r, err
	}
	cpu0, err := harness.CPUSeconds(s.PID())
	if err != nil {
		return r, err
	}
	type profiled struct {
		data []byte
		err  error
	}
	profile := make(chan profiled, 1) // with -pprof, the writes' CPU profile
	if c.pprof {
		go func() {
			p, err := s.pprof(fmt.Sprintf("/profile?seconds=%d", int(c.propDuration.Seconds())+2), c.propDuration+time.Minute)
			profile <- profiled{p, err}
		}()
	}
	streams := propagationStreams(sd.cl, c.propRate, c.propESRate, c.propDuration)
	out := sendWrites(ctx, streams, &harness.AnswerWatcher{}) // never run: no query
	time.Sleep(2 * time.Second)
	cpu1, err := harness.CPUSeconds(s.PID()) // before the profile is encoded
	if c.pprof {
		p := <-profile
		err = cmp.Or(err, p.err, os.WriteFile(filepath.Join(c.out, s.Name+"-writes.pprof"), p.data, 0o644))
	}
	if err = cmp.Or(err, ctx.Err()); err != nil {
		return r, err
	}
	if n := streams[0].n + cond(len(streams) > 1, streams[len(streams)-1].n, 0); len(out.errs) > n/100 {
		err = fmt.Errorf("%d of %d writes failed, the first: %w", len(out.errs), n, out.errs[0])
	}
	r.WriteCPU = cpu1 - cpu0
	return r, err
}

// added is the median of metric over the runs with the stanza less the
// median over those of the base, for stock (k 0) or ours (k 2).
func (in inCluster) added(k int, metric func(inRun) float64) float64 {
	med := func(runs []inRun) float64 {
		var v []float64
		for _, r := range runs {
			v = append(v, metric(r))
		}
		return median(v)
	}
	return med(in.Runs[k+1]) - med(in.Runs[k])
}

// inAdded is a column pair and its ratio: what stock's option and what our
// stanza add, and ours/stock against the target.
func inAdded(h, unit string, want float64, metric func(inRun) float64) []column[inCluster] {
	return []column[inCluster]{
		{h + " added, stock", func(in inCluster) string { return fmt.Sprintf("%.2f %s", in.added(0, metric), unit) }},
		{"ours", func(in inCluster) string { return fmt.Sprintf("%.2f %s", in.added(2, metric), unit) }},
		{"ours/stock", func(in inCluster) string {
			o, st := in.added(2, metric), in.added(0, metric)
			return cond(st <= 0, "-", fmt.Sprintf("%.2f (target ≤%.2g: %s)", o/st, want, cond(o/st <= want, "met", "MISSED")))
		}},
	}
}

var inClusterCols = append(append(append(append([]column[inCluster]{
	{"imports", func(in inCluster) string { return fmt.Sprint(in.Imports) }},
	{"runs", func(in inCluster) string { return fmt.Sprint(len(in.Runs[0])) }}},
	inAdded("CPU to ready", "s", 0.5, func(r inRun) float64 { return r.ReadyCPU })...),
	inAdded("RssAnon", "MiB", 0.4, func(r inRun) float64 { return float64(r.Settled.Anon) / 1024 })...),
	inAdded("Go live heap", "MiB", 0.4, func(r inRun) float64 { return mibOf(r.Settled.Live.Alloc) })...),
	inAdded("CPU under writes", "s", 0.5, func(r inRun) float64 { return r.WriteCPU })...)

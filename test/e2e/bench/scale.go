package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/clustersetdns/multicluster/cache"
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

// runScale adds imports up to each number of -scale-imports in turn and
// starts stock, then ours, alone: time to ready, memory and Go heap. At the
// largest number it also measures each one's memory after dnsperf and the
// propagation of API writes to its answers, then its replicas started
// together.
func runScale(ctx context.Context, c config, rep *report, sides []side) error {
	var inServers [4]side // -in-cluster's, on stock's control plane
	for n, size := range c.scaleImports {
		largest, suffix := n == len(c.scaleImports)-1, fmt.Sprintf("-%d", size)
		if err := scaleLoad(ctx, c, rep, size, sides[:cond(c.inCluster, 1, 2)]); err != nil {
			return err
		}
		var churn mix
		if c.inCluster {
			var err error
			if n == 0 {
				if _, err = prepareChurn(ctx, c, size, sides[:1]); err == nil {
					inServers, err = inClusterServers(ctx, c, sides[0])
				}
			}
			if err == nil {
				err = measureInCluster(ctx, c, rep, inServers, size)
			}
			if err != nil {
				return err
			}
			continue
		}
		if largest {
			var err error
			if churn, err = prepareChurn(ctx, c, size, sides); err != nil {
				return err
			}
		}
		for _, sd := range sides {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.waitStart(ctx)
			s, err := measureFootprint(ctx, c, rep, sd, suffix, size, largest, churn)
			if err == nil && largest {
				if err = measureChurn(ctx, c, rep, sd.cl, s, churn); err != nil {
					err = fmt.Errorf("propagation, %s: %w", sd.name, err)
				}
				s.Stop()
			}
			if err != nil {
				return err
			}
		}
		if largest && c.starts > 1 {
			rows, err := alternatingStarts(ctx, c, sides, size)
			if err != nil {
				return err
			}
			rep.starts = rows
			for _, r := range rows {
				logf("scale: %s", line(r, startsCols))
			}
		}
		// The replicas after both sides' single servers: a burst of replicas
		// must not precede one side's measurements only.
		for _, sd := range sides {
			if largest && c.replicas > 0 && ctx.Err() == nil {
				c.waitQuiet(ctx, c.quietWait)
				r, err := measureReplicas(ctx, c, sd, suffix)
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

// startsRow is a reader's times to ready over -starts rounds, a floor's with
// kube-apiserver's CPU seconds, and ours' median (Ours) to compare with.
type startsRow struct {
	Label         string
	Imports       int
	Times, APICPU []float64
	Ours          float64
}

var startsCols = []column[startsRow]{
	{"reader", func(r startsRow) string { return r.Label }},
	{"times to ready", func(r startsRow) string { return fmt.Sprintf("%.2f s", r.Times) }},
	{"median", func(r startsRow) string { return fmt.Sprintf("%.2f s", median(r.Times)) }},
	{"kube-apiserver CPU", func(r startsRow) string { return cond(r.APICPU == nil, "-", fmt.Sprintf("%.1f CPU-s", r.APICPU)) }},
	{"ours/this", func(r startsRow) string { return div(r.Ours, median(r.Times)) }},
}

// alternatingStarts starts each side's server -starts times, in turn, each
// once the control planes are idle: one start at 100,000 imports varies up
// to twice from the next on a 2-CPU machine. Each round also reads the
// floors on ours' control plane (floorRead): its ServiceImports as bytes, in
// one LIST and in one WatchList.
func alternatingStarts(ctx context.Context, c config, sides []side, imports int) ([]startsRow, error) {
	var rows []startsRow
	for _, sd := range sides {
		rows = append(rows, startsRow{Label: sd.name, Imports: imports})
	}
	rows = append(rows, startsRow{Label: "the LIST floor", Imports: imports, APICPU: []float64{}},
		startsRow{Label: "the WatchList floor", Imports: imports, APICPU: []float64{}})
	suffix := fmt.Sprintf("-%d-again", imports)
	for range c.starts {
		for i, sd := range sides {
			c.waitStart(ctx)
			s, err := c.startServer(sd, suffix, true)
			if err != nil {
				return nil, err
			}
			rows[i].Times = append(rows[i].Times, s.ReadyIn.Seconds())
			s.Stop()
		}
		for i := len(sides); i < len(rows); i++ {
			r := &rows[i]
			c.waitStart(ctx)
			took, cpu, err := floorRead(ctx, sides[len(sides)-1].cl, strings.Contains(r.Label, "WatchList"))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Label, err)
			}
			r.Times, r.APICPU = append(r.Times, took.Seconds()), append(r.APICPU, cpu)
		}
	}
	ours := median(rows[len(sides)-1].Times)
	for i := range rows {
		rows[i].Ours = ours
	}
	return rows, nil
}

// floorRead reads every ServiceImport of cl's version without decoding it,
// in one LIST from kube-apiserver's watch cache (resourceVersion 0) or in
// one WatchList (to the bookmark that ends the initial events), uncompressed:
// how long it took, and kube-apiserver's CPU seconds meanwhile.
func floorRead(ctx context.Context, cl *cluster, watchList bool) (time.Duration, float64, error) {
	hc, err := rest.HTTPClientFor(cl.env.Config)
	if err != nil {
		return 0, 0, err
	}
	defer hc.CloseIdleConnections()
	query := "resourceVersion=0"
	if watchList {
		query = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	u := strings.TrimSuffix(cl.env.Config.Host, "/") + "/apis/" + cache.ServiceImports(cl.version).GroupVersion().String() + "/serviceimports?" + query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "identity")
	pid, err := cl.env.APIServerPID()
	if err != nil {
		return 0, 0, err
	}
	cpu0, err := harness.CPUSeconds(pid)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var n int64
	if watchList {
		// One event a line; the last of the initial ones is a bookmark.
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() && !bytes.Contains(sc.Bytes(), []byte(`"k8s.io/initial-events-end":"true"`)) {
			n += int64(len(sc.Bytes()))
		}
		err = sc.Err()
	} else {
		n, err = io.Copy(io.Discard, resp.Body)
	}
	took := time.Since(t0)
	cpu1, cerr := harness.CPUSeconds(pid)
	if err = errors.Join(err, cerr); err == nil && (resp.StatusCode != http.StatusOK || n < int64(cl.loaded)*100) {
		err = fmt.Errorf("%s, %d bytes for %d imports", resp.Status, n, cl.loaded)
	}
	return took, cpu1 - cpu0, err
}

// measureFootprint starts a server and reads its memory, at the largest
// number again after -loaded-for of dnsperf, and leaves it running then.
func measureFootprint(ctx context.Context, c config, rep *report, sd side, suffix string, imports int, largest bool, m mix) (*server, error) {
	others := othersSpan()
	s, err := c.startServer(sd, suffix, true)
	if err != nil {
		return nil, err
	}
	f := footprint{Server: s.Name, Label: s.Label, Imports: imports, ReadyIn: s.ReadyIn, AtReady: s.AtReady, Others: others.others(s.PID())}
	r, err := harness.Exchange(s.Addr(), sd.cl.fx.name(imports-1), dns.TypeA)
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

// measureChurn measures the propagation of writes to s's answers alone
// (the control planes on both CPUs), then s's A-query throughput alone and
// while the same writes are sent again (the control planes on dnsperf's
// CPU, as in the QPS runs).
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
	c.waitQuiet(ctx, c.quietWait)
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
	busy.Idle, busy.Busy, busy.Alone = idle, during, quiet.Lat
	rep.props = append(rep.props, busy)
	logf("scale: %s", line(busy, churnCols))
	return err
}

func prepareChurn(ctx context.Context, c config, size int, sides []side) (mix, error) {
	if c.propESRate > 0 {
		k := len(sides)
		err := parallel(ctx, k*16, k*churnHeadless, func(ctx context.Context, i int) error {
			return sides[i%k].cl.createHeadless(ctx, churnName(i/k), 1, func(int) []string { return []string{fmt.Sprintf("10.151.%d.%d", i/k>>8, i/k&255)} })
		})
		if err != nil {
			return mix{}, fmt.Errorf("churn imports: %w", err)
		}
	}
	dir := filepath.Join(c.out, "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mix{}, err
	}
	mixes, err := writeMixes(dir, sides[0].cl.fx, size, c.queryLines, c.seed)
	if err != nil {
		return mix{}, err
	}
	return mixes[0], nil
}

func scaleLoad(ctx context.Context, c config, rep *report, size int, sides []side) error {
	added := size - sides[0].cl.loaded
	for _, sd := range sides {
		added = max(added, size-sd.cl.loaded)
	}
	if added <= 0 {
		return nil
	}
	// A create takes about 4 ms of CPU here: the bound is generous.
	within := 10*time.Minute + time.Duration(added)*20*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	logf("scale: adding %d ClusterSetIP imports to each control plane (32 clients each; at most %v)", added, within.Round(time.Minute))
	if err := parallel(ctx, len(sides), len(sides), func(ctx context.Context, k int) error { return sides[k].cl.createImports(ctx, size) }); err != nil {
		return fmt.Errorf("loading %d imports: %w", size, err)
	}
	took := time.Since(start)
	rep.loads = append(rep.loads, fmt.Sprintf("loading: %d ClusterSetIP imports in each control plane, %d added to each in %.0fs (%.0f per second per plane)",
		size, added, took.Seconds(), float64(added)/took.Seconds()))
	logf("scale: %s", rep.loads[len(rep.loads)-1])
	c.waitQuiet(ctx, 30*time.Second) // the API servers may still be busy
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

func measureReplicas(ctx context.Context, c config, sd side, suffix string) (replicaStart, error) {
	n := c.replicas
	r := replicaStart{Label: sd.name, Replicas: n, Imports: sd.cl.loaded}
	pid, err := sd.cl.env.APIServerPID()
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
			wg.Go(func() { servers[i], errs[i] = c.startServer(sd, fmt.Sprintf("%s-r%02d", suffix, i), false) })
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

// propagation is how long a change written to the API server takes to show
// in a server's DNS answers.
type propagation struct {
	Server, Label string
	Imports       int
	// ServiceImport and EndpointSlice writes sent, and per second; Seen
	// counts the writes of both kinds answered.
	Writes, ESWrites, Seen int
	Achieved, ESAchieved   float64
	// Idle and Busy are the server's A-query dnsperf runs alone and while
	// the writes were sent (zero when not measured).
	Idle, Busy perfResult
	// Lat are the writes' latencies by kind: "answer", from sending one to
	// the first DNS answer that holds the new address; "ack", to the API
	// server's response; "after ack", from that response to the answer
	// (negative: DNS answered first); "event", to the write's event on a
	// watch the bench opens beside the server's; "after event", from that
	// event to the answer: the DNS server's part, without the API server's
	// commit and its watch delivery. Alone are Lat of the same server's run
	// without dnsperf.
	Lat, Alone map[string]latencies
	// Others is the share of all CPUs' time that other processes took
	// while writing and watching.
	Others float64
}

// writeStream is one kind of write, sent at its own rate: write k sets the
// address ip of a name.
type writeStream struct {
	rate, n int
	target  func(k int) (name, ip string)
	write   func(ctx context.Context, k int, ip string) error
}

// measurePropagation writes for -prop-duration: merge patches of the
// ClusterSetIP of distinct imports at -prop-rate a second and of the churn
// imports' EndpointSlices at -prop-es-rate, and times each write to the
// first DNS answer holding the new address. during, if not nil, runs while
// the writes are sent.
func measurePropagation(ctx context.Context, c config, cl *cluster, s *server, during func(context.Context) error) (propagation, error) {
	p := propagation{Server: s.Name, Label: s.Label, Imports: cl.loaded}
	others := othersSpan(s.PID())
	streams := propagationStreams(cl, c.propRate, c.propESRate, c.propDuration)
	w := &harness.AnswerWatcher{Addr: s.Addr()}
	var events sync.Map // address → when the bench's watch first saw it
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchWrites(wctx, cl, &events); err != nil {
		return p, err
	}
	var g errgroup.Group
	g.Go(func() error { return w.Run(ctx) })
	if during != nil {
		g.Go(func() error { return during(ctx) })
	}
	out := sendWrites(ctx, streams, w)
	if err := ctx.Err(); err != nil {
		return p, err
	}
	w.Close()
	if err := g.Wait(); err != nil {
		return p, err
	}
	p.Others = others.others()
	stopWatch()
	event := map[int]time.Duration{}
	for k, ip := range out.ip {
		if t, ok := events.Load(ip); ok {
			event[k] = t.(time.Time).Sub(out.at[k])
		}
	}
	p.summarize(streams, out.sendTimes, out.ack, w.Seen(), event)
	if len(out.errs) > (p.Writes+p.ESWrites)/100 {
		return p, fmt.Errorf("%d of %d writes failed, the first: %w", len(out.errs), p.Writes+p.ESWrites, out.errs[0])
	}
	return p, nil
}

// propagationStreams are the ServiceImport writes at rate for d and, with
// esRate, the EndpointSlice writes. Every call has addresses of its own
// (10.150+4r and 10.152+4r for the r-th call on the cluster), so that each
// write changes the answer.
func propagationStreams(cl *cluster, rate, esRate int, d time.Duration) []writeStream {
	r := cl.propRuns % 26 // 10.(150..252+3).x.x
	cl.propRuns++
	// importOf spreads the writes over namespaces and names, one per import.
	importOf := func(k int) int { return cond(cl.loaded%7919 == 0, k, (k*7919)%cl.loaded) }
	ip := func(second, k int) string { return fmt.Sprintf("10.%d.%d.%d", second+4*r, (k>>8)&255, k&255) }
	patch := func(ctx context.Context, res dynamic.ResourceInterface, name, format, ip string) error {
		_, err := res.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, format, ip), metav1.PatchOptions{})
		return err
	}
	streams := []writeStream{{rate: rate, n: min(int(float64(rate)*d.Seconds()), cl.loaded, 1<<16),
		target: func(k int) (string, string) { return cl.fx.name(importOf(k)), ip(150, k) },
		write: func(ctx context.Context, k int, ip string) error {
			i := importOf(k)
			return patch(ctx, cl.imports.Namespace(cl.fx.namespace(i)), importName(i), cond(cl.version == cache.V1alpha1, `{"spec":{"ips":[%q]}}`, `{"ips":[%q]}`), ip)
		},
	}}
	if esRate > 0 {
		ess := cl.dyn.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(headlessNamespace)
		streams = append(streams, writeStream{rate: esRate, n: min(int(float64(esRate)*d.Seconds()), 1<<16),
			target: func(k int) (string, string) { return fqdn(churnName(k%churnHeadless), headlessNamespace), ip(152, k) },
			write: func(ctx context.Context, k int, ip string) error {
				return patch(ctx, ess, churnName(k%churnHeadless)+"-"+clusterID(0), `{"endpoints":[{"addresses":[%q],"conditions":{"ready":true}}]}`, ip)
			},
		})
	}
	return streams
}

// sent is what sendWrites did, by write key (stream<<20 | k): when each was
// sent, the address it set, and how long the API server took to accept it;
// and the writes' errors and how long each stream took to send.
type sent struct {
	at        map[int]time.Time
	ip        map[int]string
	ack       map[int]time.Duration
	errs      []error
	sendTimes [2]time.Duration
}

// sendWrites sends every stream's writes at its rate, paced by the clock (a
// late write does not lower the rate), at most 256 at a time, and has w
// watch the answers to each.
func sendWrites(ctx context.Context, streams []writeStream, w *harness.AnswerWatcher) *sent {
	var mu sync.Mutex // guards out
	out := &sent{at: map[int]time.Time{}, ip: map[int]string{}, ack: map[int]time.Duration{}}
	var writes errgroup.Group
	writes.SetLimit(256)
	var senders sync.WaitGroup
	started := time.Now()
	for si, st := range streams {
		senders.Go(func() {
			for k := range st.n {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(started.Add(time.Duration(k) * time.Second / time.Duration(st.rate)))):
				}
				key := si<<20 | k
				name, ip := st.target(k)
				writes.Go(func() error {
					at := time.Now()
					w.Add(key, harness.Write{Name: name, IP: ip, Sent: at})
					wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					err := st.write(wctx, k, ip)
					cancel()
					acked := time.Since(at)
					mu.Lock()
					defer mu.Unlock()
					if out.at[key], out.ip[key] = at, ip; err != nil {
						w.Drop(key)
						out.errs = append(out.errs, err)
					} else {
						out.ack[key] = acked
					}
					return nil
				})
			}
			out.sendTimes[si] = time.Since(started)
		})
	}
	senders.Wait()
	_ = writes.Wait() // nil: the errors are in out.errs
	return out
}

// summarize fills p from the writes' latencies by write key.
func (p *propagation) summarize(streams []writeStream, sendTimes [2]time.Duration, acks, seen, event map[int]time.Duration) {
	p.Lat = map[string]latencies{"ack": slices.Collect(maps.Values(acks))}
	for k, d := range seen {
		p.Lat["answer"] = append(p.Lat["answer"], d)
		if a, ok := acks[k]; ok {
			p.Lat["after ack"] = append(p.Lat["after ack"], d-a)
		}
		if e, ok := event[k]; ok {
			p.Lat["event"], p.Lat["after event"] = append(p.Lat["event"], e), append(p.Lat["after event"], d-e)
		}
	}
	p.Writes, p.Seen = streams[0].n, len(seen)
	p.Achieved = float64(p.Writes) / sendTimes[0].Seconds()
	if len(streams) > 1 {
		p.ESWrites = streams[1].n
		p.ESAchieved = float64(p.ESWrites) / sendTimes[1].Seconds()
	}
}

// watchWrites watches, beside the server, what measurePropagation writes,
// and notes in events when each address first arrived.
func watchWrites(ctx context.Context, cl *cluster, events *sync.Map) error {
	for _, res := range []dynamic.ResourceInterface{cl.imports, cl.dyn.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(headlessNamespace)} {
		list, err := res.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		wi, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, wi.Stop)
		go func() {
			for we := range wi.ResultChan() {
				if u, ok := we.Object.(*unstructured.Unstructured); ok {
					at := time.Now() // when the event arrived, not when it was read
					for _, ip := range addresses(u) {
						events.LoadOrStore(ip, at)
					}
				}
			}
		}()
	}
	return nil
}

// addresses are an import's IPs (at the root in v1alpha2, under spec in
// v1alpha1) or an EndpointSlice's endpoint addresses.
func addresses(u *unstructured.Unstructured) (ips []string) {
	eps, _, _ := unstructured.NestedSlice(u.Object, "endpoints")
	for _, e := range eps {
		if m, ok := e.(map[string]any); ok {
			a, _, _ := unstructured.NestedStringSlice(m, "addresses")
			ips = append(ips, a...)
		}
	}
	root, _, _ := unstructured.NestedStringSlice(u.Object, "ips")
	spec, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ips")
	return slices.Concat(ips, root, spec)
}

type latencies []time.Duration

// q is the nearest-rank quantile q of l (q(1) is the largest), 0 when l is
// empty; it sorts l.
func (l latencies) q(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[max(0, min(int(q*float64(len(l))+0.999999)-1, len(l)-1))]
}

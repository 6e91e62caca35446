package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// A prober pod asks names in a loop while a test rolls DNS pods, and prints
// what failed; checkProber reads its log.
//
// One failure is not ours to prevent. kube-proxy keeps the UDP conntrack
// entries of a terminating endpoint until the endpoint leaves its
// EndpointSlice, some seconds after CoreDNS's lameduck ends and it stops
// listening; a query whose random source port is the port of one of those
// entries goes to the pod that no longer listens and is refused or lost
// (kubernetes/kubernetes#129617, seen here with conntrack -E on stock
// CoreDNS's own rollout restart). The prober asks again at once, from a new
// port, after every failure: a failure while an endpoint of the Service
// terminated, whose second try answered, is that and is logged; any other
// fails the test.

// lookup is the shell of one probed lookup: it runs cmd and, when cmd fails,
// runs it once more at once and prints
// "<Unix time> fail <what> since <Unix time> again answered|failed".
func lookup(cmd, what string) string {
	return fmt.Sprintf(`
	s=$(date +%%s)
	%[1]s >/dev/null 2>&1 || { if %[1]s >/dev/null 2>&1; then a=answered; else a=failed; fi; echo "$(date +%%s) fail %[2]s since $s again $a"; }`, cmd, what)
}

// prober is the busybox script of a prober pod: it runs round, which prints
// a line for each lookup that fails (lookup), every 100 ms, and prints
// "<Unix time> rounds <count>" every 10 rounds; checkProber reads both.
func prober(round string) string {
	return "n=0\nwhile :; do" + round + `
	n=$((n+1)); [ $((n % 10)) -ne 0 ] || echo "$(date +%s) rounds $n"
	sleep 0.1
done`
}

// terminations records when each endpoint of a Service started terminating
// and when it left the Service's EndpointSlices.
type terminations struct {
	mu    sync.Mutex
	open  map[string]time.Time // address: since when it terminates
	spans [][2]time.Time       // addresses gone: from terminating to gone
}

// watchTerminations records the terminations of the endpoints of the
// Service namespace/service until the test ends.
func watchTerminations(t *testing.T, namespace, service string) *terminations {
	t.Helper()
	tr := &terminations{open: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(env.Clientset, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	note := func(any) { tr.note(inf.GetStore().List()) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: note, UpdateFunc: func(_, o any) { note(o) }, DeleteFunc: note,
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatalf("the EndpointSlices of %s/%s did not sync", namespace, service)
	}
	return tr
}

// note takes the slices' endpoints as they are now.
func (tr *terminations) note(slices []any) {
	now := time.Now()
	present := map[string]bool{}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, o := range slices {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				present[a] = true
				if _, ok := tr.open[a]; !ok && ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
					tr.open[a] = now
				}
			}
		}
	}
	for a, since := range tr.open {
		if !present[a] {
			tr.spans = append(tr.spans, [2]time.Time{since, now})
			delete(tr.open, a)
		}
	}
}

// during says whether an endpoint terminated, or had just left the slices
// (kube-proxy follows the slices a moment later), at some time from start to
// end, both in whole seconds.
func (tr *terminations) during(start, end int64) bool {
	const follow = 3 // seconds kube-proxy may take to follow the slices
	tr.mu.Lock()
	defer tr.mu.Unlock()
	overlaps := func(from, to time.Time) bool {
		return from.Unix() <= end && to.Unix()+follow >= start
	}
	for _, since := range tr.open {
		if overlaps(since, time.Now()) {
			return true
		}
	}
	for _, s := range tr.spans {
		if overlaps(s[0], s[1]) {
			return true
		}
	}
	return false
}

// checkProber fails the test for every lookup of the prober pod that failed
// since since, but those terminations explains (see above), and for a
// prober that asked nothing; it logs how many rounds the prober made.
func checkProber(ctx context.Context, t *testing.T, pod string, since time.Time, tr *terminations) {
	t.Helper()
	out, err := kubectl(ctx, "logs", "-n", "default", pod)
	if err != nil {
		t.Fatalf("%s logs: %v\n%s", pod, err, out)
	}
	fails, explained, rounds := readProber(out, since.Unix(), tr)
	t.Logf("%s: %d rounds of lookups since %s, %d failed", pod, rounds, since.Format(time.TimeOnly), len(fails)+len(explained))
	if len(explained) > 0 {
		t.Logf("%s: %d of them while an endpoint of the DNS Service terminated, answered when asked again at once "+
			"(kube-proxy's stale UDP conntrack entries, kubernetes/kubernetes#129617):\n%s", pod, len(explained), strings.Join(explained, "\n"))
	}
	if rounds == 0 {
		t.Errorf("%s asked nothing since %s: it proves nothing", pod, since.Format(time.TimeOnly))
	}
	if len(fails) > 0 {
		t.Errorf("%s: lookups failed:\n%s", pod, strings.Join(fails, "\n"))
	}
}

// readProber reads a prober's log from the second since (Unix time) on: the
// failed lookups, those that terminations explains, and the rounds made.
func readProber(log string, since int64, tr *terminations) (fails, explained []string, rounds int) {
	first, last := -1, 0 // the round counts of the window's first and last lines
	for line := range strings.Lines(log) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		sec, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || sec < since {
			continue
		}
		switch f[1] {
		case "fail":
			// <end> fail <what> since <start> again <answered|failed>
			start, err := strconv.ParseInt(field(f, 4), 10, 64)
			if err == nil && field(f, 6) == "answered" && tr.during(start, sec) {
				explained = append(explained, strings.TrimSpace(line))
			} else {
				fails = append(fails, strings.TrimSpace(line))
			}
		case "rounds":
			if n, err := strconv.Atoi(f[2]); err == nil {
				last = n
				if first < 0 {
					first = n
				}
			}
		}
	}
	return fails, explained, max(last-first, 0)
}

// field is f[i], or "" past its end.
func field(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

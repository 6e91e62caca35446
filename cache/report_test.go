package cache

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reportRig runs a controller that reads ServiceImports through v1alpha2
// only. Their watch is a fake watcher the test writes events to, so that it
// can end a watch as expired, which makes the informer list again: a relist.
// Every write goes to the fake client's store too, which a relist lists.
type reportRig struct {
	t       *testing.T
	dyn     *dynamicfake.FakeDynamicClient
	kube    *kubefake.Clientset
	c       *Controller
	watches chan *watch.RaceFreeFakeWatcher // each watch the v1alpha2 view opens
	w       *watch.RaceFreeFakeWatcher      // the open one
	lines   chan string                     // the problems logged, one a line
	rv      int                             // the last resourceVersion written
	marks   int

	mu    sync.Mutex
	skips int // OnSkip calls: what the skipped_objects_total metric counts
	logs  int // problems logged
}

var reportGVR = ServiceImports(V1alpha2)

func (r *reportRig) Infof(string, ...any) {}

func (r *reportRig) Warningf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.Contains(line, "not used in part or whole") {
		r.mu.Lock()
		r.logs++
		r.mu.Unlock()
		r.lines <- line
	}
}

// startReportRig starts a controller over the given objects, answering the
// namespaces given (all when none), and returns once it has synced and
// opened its v1alpha2 watch.
func startReportRig(t *testing.T, namespaces []string, objs ...runtime.Object) *reportRig {
	t.Helper()
	r := &reportRig{t: t, watches: make(chan *watch.RaceFreeFakeWatcher, 10), lines: make(chan string, 1000), rv: 100}
	var dynObjs, kubeObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			dynObjs = append(dynObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	r.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{reportGVR: "ServiceImportList", crdResource: "CustomResourceDefinitionList",
			ClusterPropertyResource.WithVersion("v1beta1"): "ClusterPropertyList"}, dynObjs...)
	r.dyn.PrependWatchReactor(ServiceImportResource.Resource, func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		r.watches <- w
		return true, w, nil
	})
	r.kube = kubefake.NewClientset(kubeObjs...)
	r.c = New(r.dyn, fakeImports{r.dyn}, r.kube, Config{Zones: []string{"clusterset.local."}, TTL: 5, Namespaces: namespaces, Log: r,
		OnSkip: func(string, string) { r.mu.Lock(); r.skips++; r.mu.Unlock() }})
	r.c.served = func(context.Context) (map[string]bool, error) { return map[string]bool{V1alpha2: true}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); !r.c.HasSynced(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not synced")
		}
	}
	r.w = r.nextWatch()
	return r
}

func (r *reportRig) nextWatch() *watch.RaceFreeFakeWatcher {
	r.t.Helper()
	select {
	case w := <-r.watches:
		return w
	case <-time.After(10 * time.Second):
		r.t.Fatal("no watch of ServiceImports opened")
		return nil
	}
}

// unusable is a ServiceImport, in the root shape, with one problem: a second
// IPv4 address (extra_ip). It is answered all the same.
func unusable(ns, name, rv string) *unstructured.Unstructured {
	u := usable(ns, name, rv)
	u.Object["ips"] = []any{"10.0.0.1", "10.0.0.2"}
	return u
}

// usable is that ServiceImport without the problem.
func usable(ns, name, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha2", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv},
		"type":     "ClusterSetIP", "ips": []any{"10.0.0.1"},
		"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}},
	}}
}

// nextRV is a resourceVersion newer than every one written so far.
func (r *reportRig) nextRV() string { r.rv++; return strconv.Itoa(r.rv) }

// write stores u in the fake client and sends it on the watch.
func (r *reportRig) write(u *unstructured.Unstructured) {
	r.t.Helper()
	res := r.dyn.Resource(reportGVR).Namespace(u.GetNamespace())
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err == nil {
		r.w.Modify(u)
		return
	}
	if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.w.Add(u)
}

// remove deletes the object from the fake client and sends its delete, at a
// new resourceVersion as an API server does, on the watch.
func (r *reportRig) remove(ns, name string) {
	r.t.Helper()
	if err := r.dyn.Resource(reportGVR).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.w.Delete(usable(ns, name, r.nextRV()))
}

// relist ends the watch as expired (410), as the API server does after a
// compaction, and returns once the informer has listed again and opened a
// new watch: every object it holds has been through its queue again.
func (r *reportRig) relist() {
	r.t.Helper()
	lists := r.lists()
	r.w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version"})
	r.w = r.nextWatch()
	if r.lists() != lists+1 {
		r.t.Fatalf("%d lists of ServiceImports before the watch expired, %d after: want one more", lists, r.lists())
	}
}

// lists counts the lists of ServiceImports made so far.
func (r *reportRig) lists() int {
	n := 0
	for _, a := range r.dyn.Actions() {
		if a.GetResource() == reportGVR && a.GetVerb() == "list" {
			n++
		}
	}
	return n
}

// remembered reports whether w remembers a reported write of the object key.
func remembered(w *reportedWrites, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.at[key]
	return ok
}

// settle returns the problems reported for ServiceImports written before it
// was called and not returned by an earlier settle. It writes an unusable
// marker in namespace demo and waits for its report: the view's handler is
// called in the order of its events, so every report due before the
// marker's comes before it.
func (r *reportRig) settle() []string {
	r.t.Helper()
	r.marks++
	mark := fmt.Sprintf("mark-%d", r.marks)
	r.write(unusable("demo", mark, r.nextRV()))
	return r.until(" demo/" + mark + ":")
}

// until returns the lines logged before the first that holds s.
func (r *reportRig) until(s string) []string {
	r.t.Helper()
	var before []string
	for {
		select {
		case l := <-r.lines:
			if strings.Contains(l, s) {
				return before
			}
			before = append(before, l)
		case <-time.After(10 * time.Second):
			r.t.Fatalf("no report holding %q; before it: %q", s, before)
		}
	}
}

// wantReports checks that lines report, in order, the problems of the named
// objects ("namespace/name"), one a line.
func (r *reportRig) wantReports(what string, lines []string, objects ...string) {
	r.t.Helper()
	ok := len(lines) == len(objects)
	for i := 0; ok && i < len(lines); i++ {
		ok = strings.Contains(lines[i], " "+objects[i]+": ")
	}
	if !ok {
		r.t.Errorf("%s: reported %q, want one report each of %q", what, lines, objects)
	}
}

// wantMetricCounted checks that OnSkip, which the skipped_objects_total
// metric counts, was called once for every problem logged: no more, no fewer.
// A report logs a problem, then calls OnSkip: the last one may be between
// the two, so the counts are given a moment to meet.
func (r *reportRig) wantMetricCounted() {
	r.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		skips, logs := r.skips, r.logs
		r.mu.Unlock()
		if skips == logs {
			return
		}
		if time.Now().After(deadline) {
			r.t.Errorf("OnSkip called %d times for %d problems logged", skips, logs)
			return
		}
	}
}

// A relist delivers every object again at the resourceVersion reported
// already: nothing is reported again, in the log or the metric.
func TestReportOnceAcrossRelist(t *testing.T) {
	r := startReportRig(t, nil, unusable("demo", "web", "5"))
	r.wantReports("at start", r.settle(), "demo/web")
	r.relist()
	r.wantReports("after a relist", r.settle())
	r.wantMetricCounted()
}

// Every new write that still has the problem is reported again; a write
// without it is not, and the next write with it is.
func TestReportEachWrite(t *testing.T) {
	r := startReportRig(t, nil, unusable("demo", "web", "5"))
	r.wantReports("at start", r.settle(), "demo/web")
	r.write(unusable("demo", "web", r.nextRV()))
	r.wantReports("after a new write", r.settle(), "demo/web")
	r.write(usable("demo", "web", r.nextRV()))
	r.wantReports("after a write that fixes it", r.settle())
	r.write(unusable("demo", "web", r.nextRV()))
	r.wantReports("after a write that breaks it again", r.settle(), "demo/web")
	r.wantMetricCounted()
}

// Objects in a namespace the configuration does not answer are never
// reported, ServiceImports or EndpointSlices, and nothing of them is kept.
func TestReportOnlyAnsweredNamespaces(t *testing.T) {
	noCluster := func(ns, name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4}
	}
	r := startReportRig(t, []string{"demo"}, unusable("other", "web", "5"), unusable("demo", "web", "5"), noCluster("other", "web-a"))
	r.wantReports("at start", r.settle(), "demo/web")
	r.write(unusable("other", "web", r.nextRV()))
	r.wantReports("after a write in other", r.settle())

	// The slice in other was listed before this one in demo is watched: its
	// report would come first.
	if _, err := r.kube.DiscoveryV1().EndpointSlices("demo").Create(context.Background(), noCluster("demo", "mark-slice"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := r.until("EndpointSlice demo/mark-slice:"); len(got) != 0 {
		t.Errorf("reported before the slice in demo: %q", got)
	}
	if n := r.c.sliceReports.size(); n != 1 {
		t.Errorf("%d EndpointSlices remembered, want 1 (demo's)", n)
	}
	if remembered(r.c.shapes[0].reported, "other/web") {
		t.Error("other/web remembered")
	}
	r.wantMetricCounted()
}

// A deleted object is forgotten, and reported again once created again.
func TestReportAfterDeleteAndRecreate(t *testing.T) {
	r := startReportRig(t, nil, unusable("demo", "web", "5"))
	r.wantReports("at start", r.settle(), "demo/web")
	r.remove("demo", "web")
	r.wantReports("after the delete", r.settle())
	if remembered(r.c.shapes[0].reported, "demo/web") {
		t.Error("demo/web still remembered after its delete")
	}
	r.write(unusable("demo", "web", r.nextRV()))
	r.wantReports("after it is created again", r.settle(), "demo/web")
	r.wantMetricCounted()
}

// While a view takes over from another of its shape, both deliver the same
// writes, the old one perhaps behind: each write is reported once.
func TestReportedWritesOfTwoViews(t *testing.T) {
	w := newReportedWrites()
	steps := []struct {
		what string
		rv   string
		want bool
	}{
		{"the old view delivers write 5", "5", true},
		{"the new view lists write 5", "5", false},
		{"the new view delivers write 7", "7", true},
		{"the old view, behind, delivers write 6", "6", false},
		{"the old view delivers write 7", "7", false},
	}
	for _, s := range steps {
		if got := w.note("demo/web", s.rv, true); got != s.want {
			t.Errorf("%s: report %v, want %v", s.what, got, s.want)
		}
	}
}

// A slice with two reasons at one write has each reported once, whichever
// comes first and however often the rebuilds alternate them; a new write
// reports both again, and what is kept stays two reasons long.
func TestNoteReasonOncePerWrite(t *testing.T) {
	w := newReportedWrites()
	var got []bool
	for _, r := range []string{"unlisted", "too_long", "unlisted", "too_long", "unlisted"} {
		got = append(got, w.noteReason("ns/s", r, "5 7"))
	}
	for _, r := range []string{"too_long", "unlisted", "too_long"} {
		got = append(got, w.noteReason("ns/s", r, "6 7"))
	}
	if want := []bool{true, true, false, false, false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	if n := strings.Count(w.at["ns/s"], "\n"); n != 1 {
		t.Errorf("kept %q: want the two reasons of the last write", w.at["ns/s"])
	}
	w.forget("ns/s")
	if !w.noteReason("ns/s", "unlisted", "6 7") {
		t.Error("not reported again after the slice was deleted")
	}
}

package cache

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// A view is one API version's watch on ServiceImports. Each shape of the
// object (root, spec) has at most one view answering, and at most one
// starting in its place; reconcile moves them to the versions discovery
// says are served (served.go).

// shape is one layout of a ServiceImport's fields. The versions that share
// it read alike, so one view, through the first of them served, is enough.
type shape struct {
	name     string
	versions []string        // the versions that read it, preferred first
	active   *view           // synced and answering
	starting *view           // started, not synced yet: replaces active once synced
	reported *reportedWrites // the writes whose problems a view of this shape reported
}

// view is one API version's watch on ServiceImports: a reflector that
// writes into the view's imports.
type view struct {
	version   string
	imports   *importStore
	reflector *toolscache.Reflector
	stop      context.CancelFunc
	done      chan struct{}
}

// synced reports whether the view's first list is stored.
func (v *view) synced() bool { return v.imports.synced.Load() }

func (c *Controller) newView(sh *shape, version string) *view {
	tv := typedVersions[version]
	kind := ImportKind(version)
	// WatchList, not a LIST: a LIST, even streamed, had kube-apiserver hold
	// each response's objects whole until read, past 18 GiB for 20 replicas
	// starting at 100,000 imports, and pages of it took five times as long
	// (docs/benchmarks.md, "A LIST in place of WatchList").
	lw := toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors("ServiceImports "+version, c.access, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = c.cfg.Labels
			return c.siClient.List(ctx, version, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = c.cfg.Labels
			return c.siClient.Watch(ctx, version, o)
		},
	}), c.siClient)
	read := func(obj any) (*Import, bool) { return tv.read(obj, c.cfg.DenyRanges) }
	imports := newImportStore(version, read,
		func(k string, _ bool, cur *Import) {
			if cur == nil {
				sh.reported.forget(k)
			} else {
				c.reportWrite(sh.reported, kind, cur)
			}
			c.enqueue(k)
		})
	r := toolscache.NewReflectorWithOptions(lw, tv.example, imports, toolscache.ReflectorOptions{Name: kind, TypeDescription: kind})
	return &view{version: version, imports: imports, reflector: r}
}

// reconcile starts and stops views to match the versions served, one view per
// shape, and puts a view in place of its shape's old one once its first list
// is stored. It returns true when it knows what is served and every started
// view answers.
func (c *Controller) reconcile(ctx context.Context) bool {
	served := c.discover(ctx)
	if served == nil {
		return false
	}

	changed, complete := false, true
	read := map[string]bool{} // shapes that have a version to read them through
	c.viewsMu.Lock()
	for _, sh := range c.shapes {
		want := ""
		for _, v := range sh.versions {
			if served[v] {
				want = v
				break
			}
		}
		read[sh.name] = want != ""
		if sh.starting != nil && sh.starting.version != want {
			c.retire(sh.starting)
			sh.starting = nil
		}
		switch {
		case want == "" && sh.active != nil:
			c.retire(sh.active)
			c.logf("ServiceImport %s is no longer served: stopped watching it", sh.active.version)
			sh.active, changed = nil, true
		case want == "" || (sh.active != nil && sh.active.version == want):
		case sh.starting == nil:
			sh.starting = c.startView(ctx, sh, want)
			if sh.active == nil {
				c.logf("ServiceImport %s is served: watching it", want)
			} else {
				c.logf("ServiceImport %s is served: watching it in place of %s, which has the same schema", want, sh.active.version)
			}
		}
		// The new view takes over once it has synced and seen at least what
		// the old one has, so that no answer goes back to older data.
		if v := sh.starting; v != nil && v.synced() &&
			(sh.active == nil || !newer(sh.active.reflector.LastSyncResourceVersion(), v.reflector.LastSyncResourceVersion())) {
			if old := sh.active; old != nil {
				c.retire(old)
				c.logf("ServiceImport %s: now read through %s; stopped watching %s", old.version, want, old.version)
			}
			sh.active, sh.starting, changed = v, nil, true
			// Forget the reports of objects the new view does not hold:
			// deleted while it started, and the old view stopped before
			// it delivered the delete.
			sh.reported.keepOnly(func(k string) bool { return v.imports.get(k) != nil })
		}
		if sh.active == nil && sh.starting == nil {
			sh.reported.keepOnly(nil) // the shape is not read: nothing of it to remember
		}
		complete = complete && sh.starting == nil
	}
	if changed {
		views := make([]*view, 0, len(c.shapes))
		for _, sh := range c.shapes {
			if sh.active != nil {
				views = append(views, sh.active)
			}
		}
		c.views = views // readers hold the old slice
	}
	c.viewsMu.Unlock()
	if n := c.discoAnswered; n > c.discoSeen.Load() {
		// The views match what this discovery said: the answers kept
		// while a shape might be unread are decided again.
		c.discoSeen.Store(n)
		for _, k := range c.kept.keys() {
			c.enqueue(k)
		}
	}
	c.noteServed(served, read)
	if changed && c.live.Load() {
		c.syncAll()
	}
	return complete
}

// retire stops views; Run waits for them when it ends.
func (c *Controller) retire(views ...*view) {
	for _, v := range views {
		if v != nil {
			v.stop()
			c.retired = append(c.retired, v)
		}
	}
}

func (c *Controller) startView(ctx context.Context, sh *shape, version string) *view {
	v := c.newView(sh, version)
	vctx, cancel := context.WithCancel(ctx)
	v.stop, v.done = cancel, make(chan struct{})
	go func() { defer close(v.done); v.reflector.RunWithContext(vctx) }()
	return v
}

func (c *Controller) activeVersions() []string {
	c.viewsMu.RLock()
	defer c.viewsMu.RUnlock()
	var out []string
	for _, v := range c.views {
		out = append(out, v.version)
	}
	return out
}

// newer reports whether resourceVersion a is newer than b. The two views of
// one object share its resourceVersions, and apimachinery compares them
// (KEP-5504); when either is not well formed, neither is newer.
func newer(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && n > 0
}

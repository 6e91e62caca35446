package cache

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Logger is what the cache logs through.
type Logger interface {
	Infof(format string, args ...any)
	Warningf(format string, args ...any)
}

// Stats counts what the answers hold.
type Stats struct {
	Imports   map[string]int // services answered, by ServiceImport version
	Endpoints int            // ready headless endpoint names
}

// Config says what to watch and how to build answers.
type Config struct {
	Zones []string // lower-case, fully qualified
	TTL   uint32
	// Fallback reads the spec shape through v1alpha1 where the API server
	// does not serve v1beta1.
	Fallback bool
	// Namespaces, when not empty, are the only namespaces answered.
	Namespaces []string
	// Labels, when set, is a label selector ServiceImports must match.
	Labels string
	// Reverse keeps an index from ClusterSetIP to services, for LookupIP:
	// set it when the plugin answers reverse zones.
	Reverse bool
	Log     Logger
	// OnSkip is called for each object, or part of one, that is not used:
	// once per write of the object, and only in the namespaces answered.
	OnSkip func(kind, reason string)
	// OnStats is called after the answers change.
	OnStats func(Stats)
	// OnUnread is called with every version of Versions once discovery
	// first answers, and again whenever one changes: unread is true while
	// the API server serves that version and the configuration reads no
	// version of its shape.
	OnUnread func(version string, unread bool)
}

// Controller keeps the answers of every imported service up to date.
type Controller struct {
	cfg    Config
	idx    *index
	queue  workqueue.TypedRateLimitingInterface[string]
	slices toolscache.SharedIndexInformer
	synced atomic.Bool
	live   atomic.Bool // the first build has begun: events are queued from now on
	syncMu sync.Mutex  // one sync at a time: the worker's and syncAll's
	serial atomic.Uint32

	// One watch per shape: each shape's view reads it through the first of
	// its versions that the API server serves. A view answers once its
	// first list is stored; served asks discovery.
	dyn     dynamic.Interface
	shapes  []*shape
	served  func(ctx context.Context, version string) (bool, error)
	viewsMu sync.RWMutex
	views   []*view // the synced views of the shapes, in shape order

	crd        toolscache.SharedIndexInformer // the ServiceImport CRD, by name: discovery is asked when it changes
	crdChanged chan struct{}                  // a poke from crd's handlers to Run
	crdHurry   atomic.Bool                    // the poke is for a change: ask discovery often for a while
	crdAccess  *permission                    // the CRD watch's: while denied, discovery is polled
	hurryUntil time.Time                      // discovery is asked every hurry until then: the CRD changed
	every      time.Duration                  // discovery interval while the CRD is not watched, and after a failure
	idle       time.Duration                  // discovery interval while the CRD is watched and unchanged
	hurry      time.Duration                  // discovery interval for a while after the CRD changes

	discoErr     bool              // the last discovery failed (logged once)
	servedAt     time.Time         // when discovery was last asked
	lastSeen     map[string]bool   // what it said last, by version; nil until it answers
	retired      []*view           // views replaced or stopped, waited for when Run ends
	unread       map[string]bool   // versions served but read by no view; nil before the first discovery
	noCRD        bool              // no version is served (logged once)
	apiDown      atomic.Bool       // list or watch cannot reach the API server (logged once)
	access       *permission       // the ServiceImport and EndpointSlice watches'
	lossReported map[string]string // service key -> resourceVersion whose data loss was reported; sync's alone

	sliceReports *reportedWrites // the EndpointSlice writes whose problems were reported

	statsMu   sync.Mutex
	imports   map[string]int
	endpoints int
}

// shape is one layout of a ServiceImport's fields. The versions that share
// it read alike, so one view, through the first of them served, is enough.
type shape struct {
	name     string
	versions []string // the versions that read it, preferred first
	read     func(u *unstructured.Unstructured, version string) *Import
	active   *view           // synced and answering
	starting *view           // started, not synced yet: replaces active once synced
	reported *reportedWrites // the writes whose problems a view of this shape reported
}

// view is one API version's watch on ServiceImports: a reflector that
// writes into the view's records.
type view struct {
	version   string
	records   *recordStore
	reflector *toolscache.Reflector
	stop      context.CancelFunc
	done      chan struct{}
}

// synced reports whether the view's first list is stored.
func (v *view) synced() bool { return v.records.synced.Load() }

// shapeOf is the shape each version's objects have, whether read or not.
var shapeOf = map[string]string{V1alpha2: "root", V1beta1: "spec", V1alpha1: "spec"}

// readOption is the Corefile option that reads a version the default
// configuration does not.
var readOption = map[string]string{V1alpha1: "fallback v1alpha1"}

const serviceImportGroup = "multicluster.x-k8s.io"

const sliceByService = "service"

// New makes a controller over the given clients; Run starts it.
func New(dyn dynamic.Interface, kube kubernetes.Interface, cfg Config) *Controller {
	if cfg.Log == nil {
		cfg.Log = nopLogger{}
	}
	c := &Controller{
		cfg:          cfg,
		idx:          newIndex(cfg.Reverse),
		queue:        workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		imports:      map[string]int{},
		dyn:          dyn,
		lossReported: map[string]string{},

		sliceReports: newReportedWrites(),

		crdChanged: make(chan struct{}, 1),
		every:      pollDiscovery,
		idle:       idleDiscovery,
		hurry:      hurryDiscovery,
	}
	c.serial.Store(uint32(time.Now().Unix()))
	c.access = &permission{retry: 5 * time.Second,
		denied: func(err error) {
			c.cfg.Log.Warningf("permission denied: the plugin needs list and watch on serviceimports.multicluster.x-k8s.io "+
				"and endpointslices.discovery.k8s.io (deploy/rbac.yaml); not ready until it has them: %v", err)
		},
		granted: func(what string) { c.logf("%s: access granted", what) },
	}
	c.crdAccess = &permission{retry: crdDeniedRetry,
		denied: func(err error) {
			c.cfg.Log.Warningf("cannot watch the ServiceImport CRD, so API discovery is asked every %s to follow the versions served; "+
				"grant get, list and watch on customresourcedefinitions named %s (deploy/rbac.yaml) to make it ask only when the CRD changes: %v",
				pollDiscovery, ServiceImportCRD, err)
		},
		granted: func(string) { c.logf("watching the ServiceImport CRD: discovery is now asked only when it changes") },
	}
	spec := &shape{name: "spec", versions: []string{V1beta1}, read: importFromSpec, reported: newReportedWrites()}
	if cfg.Fallback {
		spec.versions = append(spec.versions, V1alpha1)
	}
	root := &shape{name: "root", versions: []string{V1alpha2}, read: importFromRoot, reported: newReportedWrites()}
	c.shapes = []*shape{root, spec}
	c.served = discoveryServed(kube.Discovery())
	c.crd = c.newCRDWatch()

	sel := LabelServiceName // only multi-cluster slices are listed at all
	c.slices = toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors("EndpointSlices", c.access, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).Watch(ctx, o)
		},
	}), kube), &discoveryv1.EndpointSlice{}, 0, toolscache.Indexers{sliceByService: func(obj any) ([]string, error) {
		s := obj.(*Slice)
		if s.Service == "" {
			return nil, nil
		}
		return []string{key(s.Namespace, s.Service)}, nil
	}})
	_ = c.slices.SetTransform(func(obj any) (any, error) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return obj, nil
		}
		return sliceFrom(es), nil
	})
	_, _ = c.slices.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.reportWrite(c.sliceReports, "EndpointSlice", obj); c.enqueueSlice(obj) },
		UpdateFunc: func(old, obj any) {
			c.reportWrite(c.sliceReports, "EndpointSlice", obj)
			c.enqueueSlice(old)
			c.enqueueSlice(obj)
		},
		DeleteFunc: func(obj any) { forgetDeleted(c.sliceReports, obj); c.enqueueSlice(obj) },
	})
	return c
}

func (c *Controller) newView(sh *shape, version string) *view {
	gvr := schema.GroupVersionResource{Group: serviceImportGroup, Version: version, Resource: "serviceimports"}
	res := c.dyn.Resource(gvr)
	kind := "ServiceImport " + version
	lw := toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors("ServiceImports "+version, c.access, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = c.cfg.Labels
			return res.Namespace(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = c.cfg.Labels
			return res.Namespace(metav1.NamespaceAll).Watch(ctx, o)
		},
	}), c.dyn)
	records := newRecordStore(func(u *unstructured.Unstructured) *Import { return sh.read(u, version) },
		func(k string, old, cur *Import) {
			if cur == nil {
				sh.reported.forget(k)
			} else {
				c.reportWrite(sh.reported, kind, cur)
			}
			c.enqueue(k)
		})
	r := toolscache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, records, toolscache.ReflectorOptions{Name: kind, TypeDescription: kind})
	return &view{version: version, records: records, reflector: r}
}

// retryEvery is how often a list or watch is retried while the API server
// cannot be reached: often enough that a restarted one is seen within half
// a second, seldom enough (a few requests a second per replica) to be no
// burden on it while it starts.
const retryEvery = 500 * time.Millisecond

// refusals tells a refusal that lasts from one that passes. A kube-apiserver
// that has just started says ok on /readyz before its RBAC authorizer has
// caught up, and for a second or two refuses requests it allows a moment
// later: after a restart, the plugin's lists and watches are refused. An
// identity that had access before is refused for a while only: it is tried
// again every passingRetry, and not reported, for passingFor.
type refusals struct {
	granted atomic.Bool  // a request has been allowed since start
	since   atomic.Int64 // unix nanoseconds of the first refusal since the last allowed request; 0 while allowed
}

const (
	passingRetry = 200 * time.Millisecond
	passingFor   = 15 * time.Second
)

// allowed records an allowed request.
func (r *refusals) allowed() {
	r.granted.Store(true)
	r.since.Store(0)
}

// passing records a refusal and reports whether it is likely to pass: the
// identity had access before and has been refused for less than passingFor.
func (r *refusals) passing() bool {
	now := time.Now().UnixNano()
	r.since.CompareAndSwap(0, now)
	return r.granted.Load() && time.Duration(now-r.since.Load()) < passingFor
}

// permission is what waitingOutErrors does when a group of watches is refused: a
// refusal likely to pass is retried every passingRetry, unreported; one that
// lasts is reported once, with denied, and retried every retry, until a
// request is allowed again, which granted reports.
type permission struct {
	refusals
	deniedNow atomic.Bool // a lasting refusal was reported, and nothing allowed since
	retry     time.Duration
	denied    func(err error)
	granted   func(what string)
}

// waitingOutErrors makes list and watch calls wait out an unreachable API server,
// retrying every retryEvery, instead of failing back to the informer, whose
// exponential backoff would grow to 30s during a long outage and delay the
// recovery by as much. A permission error is waited out as well, as access
// says, so that missing RBAC gives one clear log line rather than a stream
// of client-go's. Other errors the API server returns (404, 410) go to the
// informer at once. Each outage and its end are logged once.
func (c *Controller) waitingOutErrors(what string, access *permission, lw *toolscache.ListWatch) *toolscache.ListWatch {
	wait := func(ctx context.Context, err error) bool {
		if err == nil {
			access.allowed()
			if c.apiDown.CompareAndSwap(true, false) {
				c.logf("the API server answers again")
			}
			if access.deniedNow.CompareAndSwap(true, false) {
				access.granted(what)
			}
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		every := retryEvery
		var status apierrors.APIStatus
		switch {
		case (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && access.passing():
			every = passingRetry
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			if access.deniedNow.CompareAndSwap(false, true) {
				access.denied(err)
			}
			every = access.retry
		case errors.As(err, &status):
			return false
		default:
			if c.apiDown.CompareAndSwap(false, true) {
				c.cfg.Log.Warningf("cannot reach the API server; answering from what is known and retrying every %s: %v", retryEvery, err)
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(every):
			return true
		}
	}
	return retrying(lw, wait)
}

func tombstone(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// enqueue queues the service k. Before the first build it does nothing:
// that build reads every store.
func (c *Controller) enqueue(k string) {
	if c.live.Load() {
		c.queue.Add(k)
	}
}

func (c *Controller) enqueueSlice(obj any) {
	if s, ok := tombstone(obj).(*Slice); ok && s.Service != "" {
		c.enqueue(key(s.Namespace, s.Service))
	}
}

// Run starts the informers and keeps the answers current until ctx ends.
// It follows the ServiceImport versions the API server serves: a version that
// appears gets a view once its first list is stored, one that goes away loses
// its view, and every service is then rebuilt from the views left.
func (c *Controller) Run(ctx context.Context) {
	slicesDone, crdDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(slicesDone); c.slices.RunWithContext(ctx) }()
	go func() { defer close(crdDone); c.crd.RunWithContext(ctx) }()
	workerDone := make(chan struct{})
	defer func() {
		c.queue.ShutDown()
		if c.synced.Load() {
			<-workerDone
		}
		<-slicesDone
		<-crdDone
		c.viewsMu.Lock()
		for _, sh := range c.shapes {
			c.retire(sh.active, sh.starting)
			sh.active, sh.starting = nil, nil
		}
		for _, v := range c.retired {
			<-v.done
		}
		c.views, c.retired = nil, nil
		c.viewsMu.Unlock()
	}()
	for {
		complete := c.reconcile(ctx)
		if !c.synced.Load() && complete && c.slices.HasSynced() {
			// Build everything once before answering, so the first answers
			// are whole. An event from now on is queued: the stores hold
			// every earlier one, and syncAll reads them.
			c.live.Store(true)
			c.syncAll()
			c.synced.Store(true)
			c.publishStats()
			c.logf("synced: %d services from ServiceImport %v", c.idx.count(), c.activeVersions())
			go func() {
				defer close(workerDone)
				for c.processNext() {
				}
			}()
		}
		// Until the next discovery is due, or the CRD changes; while a view
		// is starting, often enough to put it in place soon after it syncs.
		wait := c.discoveryGap() - time.Since(c.servedAt)
		if !c.synced.Load() || !complete {
			wait = min(wait, 50*time.Millisecond)
		}
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c.crdChanged:
			c.poked()
		case <-timer.C:
		}
		timer.Stop()
	}
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
			sh.reported.keepOnly(func(k string) bool { return v.records.get(k) != nil })
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

func (c *Controller) logf(format string, args ...any) { c.cfg.Log.Infof(format, args...) }

// nopLogger is the Logger of a Config that names none.
type nopLogger struct{}

func (nopLogger) Infof(string, ...any)    {}
func (nopLogger) Warningf(string, ...any) {}

// syncAll rebuilds every service known to any view, slice or answer, here
// rather than through the queue: client-go's workqueue keeps a set of the
// keys waiting, and a Go map never gives back the room it grew to, so a
// queue that once held every key would keep tens of bytes per service for
// the life of the process.
func (c *Controller) syncAll() {
	keys := map[string]struct{}{}
	c.viewsMu.RLock()
	for _, v := range c.views {
		for _, k := range v.records.keys() { // the strings the store holds: the index will share them
			keys[k] = struct{}{}
		}
	}
	c.viewsMu.RUnlock()
	for _, k := range c.slices.GetIndexer().ListIndexFuncValues(sliceByService) {
		keys[k] = struct{}{}
	}
	c.idx.each(func(s *Service) bool {
		keys[key(s.Namespace(), s.Name())] = struct{}{}
		return true
	})
	for k := range keys {
		c.sync(k)
	}
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

func (c *Controller) processNext() bool {
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	c.sync(k)
	c.queue.Forget(k)
	return true
}

// HasSynced reports whether every watch has listed and the first answers are built.
func (c *Controller) HasSynced() bool { return c.synced.Load() }

// Lookup returns the answers of the service "<name>.<namespace>", or nil.
func (c *Controller) Lookup(nameDotNamespace string) *Service { return c.idx.get(nameDotNamespace) }

// LookupIP returns the services whose ClusterSetIPs hold ip.
func (c *Controller) LookupIP(ip netip.Addr) []*Service { return c.idx.lookupIP(ip) }

// HasNamespace reports whether any service of the namespace has answers.
func (c *Controller) HasNamespace(ns string) bool { return c.idx.hasNamespace(ns) }

// Serial is the SOA serial: it moves forward whenever an answer changes.
func (c *Controller) Serial() uint32 { return c.serial.Load() }

// Each calls f for every service with answers until f returns false.
func (c *Controller) Each(f func(*Service) bool) { c.idx.each(f) }

// sync rebuilds the answers of one service from the views' records and the slices.
func (c *Controller) sync(k string) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	prev := c.idx.get(k)
	var im *Import
	if ns, _ := splitKey(k); c.answers(ns) {
		im = c.choose(k, prev)
	}
	var next *Service
	if im != nil && im.HasData {
		var sliceRecords []*Slice
		if im.Headless {
			objs, _ := c.slices.GetIndexer().ByIndex(sliceByService, k)
			for _, o := range objs {
				sliceRecords = append(sliceRecords, o.(*Slice))
			}
		}
		if n, ok := normalize(im, sliceRecords); ok {
			if prev != nil && prev.inputs().equal(n) {
				if prev.rec != im {
					// Same answers from a newer record, or from another
					// version of the same data: no serial change.
					next = &Service{}
					*next = *prev
					next.rec = im
					c.idx.put(k, next)
					if prev.Version() != im.Version() {
						c.account(prev, -1)
						c.account(next, +1)
						c.publishStatsIfSynced()
					}
				}
				return
			}
			next = build(im, n, c.cfg.Zones, c.cfg.TTL)
		}
	}
	if prev == nil && next == nil {
		return
	}
	c.idx.put(k, next)
	c.bumpSerial()
	c.account(prev, -1)
	c.account(next, +1)
	c.publishStatsIfSynced()
}

// answers reports whether the configuration answers the namespace.
func (c *Controller) answers(namespace string) bool {
	return len(c.cfg.Namespaces) == 0 || slices.Contains(c.cfg.Namespaces, namespace)
}

func (c *Controller) publishStatsIfSynced() {
	if c.synced.Load() {
		c.publishStats()
	}
}

// choose picks the record a service is answered from (chooseRecord, in
// choose.go, says how) and reports a loss of its data once per write, not on
// every rebuild of the service.
func (c *Controller) choose(k string, prev *Service) *Import {
	var buf [4]viewRecord // two shapes, each with a view in place and one starting
	views := c.viewRecords(k, buf[:0])
	switch verdict, at := judgeLoss(views, prev); {
	case verdict == lost && c.lossReported[k] != at:
		c.lossReported[k] = at
		ns, name := splitKey(k)
		c.report("ServiceImport", ns, name, []string{ReasonDataLost})
	case verdict == notLost:
		delete(c.lossReported, k)
	}
	return chooseRecord(views, prev)
}

// viewRecords appends to out what every view holds of the service k: the
// answering views first, in shape order, then those starting.
func (c *Controller) viewRecords(k string, out []viewRecord) []viewRecord {
	held := func(v *view, role viewRole) viewRecord {
		return viewRecord{version: v.version, role: role, record: v.records.get(k)}
	}
	c.viewsMu.RLock()
	defer c.viewsMu.RUnlock()
	for _, v := range c.views {
		out = append(out, held(v, answering))
	}
	for _, sh := range c.shapes {
		if sh.starting != nil {
			out = append(out, held(sh.starting, starting))
		}
	}
	return out
}

func splitKey(k string) (namespace, name string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '.' {
			return k[i+1:], k[:i]
		}
	}
	return "", k
}

// newer reports whether resourceVersion a is newer than b. The two views of
// one object share its resourceVersions, and apimachinery compares them
// (KEP-5504); when either is not well formed, neither is newer.
func newer(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && n > 0
}

func (c *Controller) bumpSerial() {
	for {
		old := c.serial.Load()
		next := max(old+1, uint32(time.Now().Unix()))
		if c.serial.CompareAndSwap(old, next) {
			return
		}
	}
}

func (c *Controller) account(s *Service, d int) {
	if s == nil {
		return
	}
	c.statsMu.Lock()
	c.imports[s.Version()] += d
	c.endpoints += d * s.Endpoints()
	c.statsMu.Unlock()
}

func (c *Controller) publishStats() {
	if c.cfg.OnStats == nil {
		return
	}
	c.statsMu.Lock()
	st := Stats{Imports: map[string]int{}, Endpoints: c.endpoints}
	for _, v := range Versions {
		st.Imports[v] = c.imports[v]
	}
	c.statsMu.Unlock()
	c.cfg.OnStats(st)
}

// retrying calls lw's list and watch again for as long as wait, which may
// sleep, says to after an error.
func retrying(lw *toolscache.ListWatch, wait func(context.Context, error) bool) *toolscache.ListWatch {
	list, watchF := lw.ListWithContextFunc, lw.WatchFuncWithContext
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			for {
				obj, err := list(ctx, o)
				if !wait(ctx, err) {
					return obj, err
				}
			}
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			for {
				w, err := watchF(ctx, o)
				if !wait(ctx, err) {
					return w, err
				}
			}
		},
	}
}

package cache

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// ClusterID, when set, is the local cluster's ID; otherwise the
	// ClusterProperty cluster.clusterset.k8s.io is watched for it (local.go).
	ClusterID string
	// PreferLocal makes every headless service prefer the local cluster's
	// endpoints, as trafficDistribution PreferClose makes one.
	PreferLocal bool
	// LocalZone is the answering replica's topology zone, lower-case: a
	// service that prefers the local cluster's endpoints prefers, before
	// them, those of the local cluster in this zone. "" for none.
	LocalZone string
	// DenyRanges are addresses never answered, beside those no Service can
	// have (guard.go): the cluster's own node or pod CIDRs, say.
	DenyRanges []netip.Prefix
	// AllowNamespaces are the protected namespaces (ProtectedNamespaces)
	// whose imports are answered all the same; names, or patterns ending
	// in '*'.
	AllowNamespaces []string
	// MaxEndpoints caps the ready endpoints a service keeps; 0 for
	// DefaultMaxEndpoints, negative for no cap.
	MaxEndpoints int
	// Reverse keeps an index from ClusterSetIPs (and, with
	// ReverseEndpoints, headless endpoints' addresses) to services, for LookupIP:
	// set it when the plugin answers reverse zones.
	Reverse bool
	// ReverseEndpoints adds the addresses of headless services' ready
	// endpoints to Reverse's index.
	ReverseEndpoints bool
	// Selectors are the groupings of headless endpoints kept for the
	// names that pin or prefer a cluster or a zone.
	Selectors Selectors
	Log       Logger
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
	dyn      dynamic.Interface // the CRD's watch
	siClient ImportClient
	shapes   []*shape
	served   func(ctx context.Context) (map[string]bool, error)
	viewsMu  sync.RWMutex
	views    []*view // the synced views of the shapes, in shape order

	crd           toolscache.SharedIndexInformer // the ServiceImport CRD, by name: discovery is asked when it changes
	crdChanged    chan struct{}                  // a poke from crd's handlers to Run
	crdHurry      atomic.Bool                    // the poke is for a change: ask discovery often for a while
	dataLeftAt    atomic.Int64                   // unix nanoseconds of the last poke for data leaving a shape (dataLeft)
	dataLeftLater atomic.Bool                    // a poke for data leaving a shape is due at dataLeftAt + hurryFor
	discoAsked    atomic.Uint64                  // discoveries asked, counted before each is sent
	discoAnswered uint64                         // the number of the last discovery that answered; Run's alone
	discoSeen     atomic.Uint64                  // the number of the last discovery reconcile acted on
	kept          keptAnswers                    // answers kept while a shape may be unread (mayBeUnread)
	crdAccess     *permission                    // the CRD watch's: while denied, discovery is polled
	hurryUntil    time.Time                      // discovery is asked every hurry until then: the CRD changed
	every         time.Duration                  // discovery interval while the CRD watch starts, and after a failure
	denied        time.Duration                  // discovery interval while the CRD may not be watched
	idle          time.Duration                  // discovery interval while the CRD is watched and unchanged
	hurry         time.Duration                  // discovery interval for a while after the CRD changes

	discoErr     bool              // the last discovery failed (logged once)
	servedAt     time.Time         // when discovery was last asked
	lastSeen     map[string]bool   // what it said last, by version; nil until it answers
	retired      []*view           // views replaced or stopped, waited for when Run ends
	unread       map[string]bool   // versions served but read by no view; nil before the first discovery
	noCRD        bool              // no version is served (logged once)
	apiDown      atomic.Bool       // list or watch cannot reach the API server (logged once)
	answered     atomic.Int64      // when the API server last answered a list or watch, in nanoseconds since epoch; 0 for never
	throttled    atomic.Bool       // a list or watch was refused with 429 (logged once)
	access       *permission       // the ServiceImport and EndpointSlice watches'
	lossReported map[string]string // service key -> resourceVersion whose data loss was reported; sync's alone

	sliceReports *reportedWrites // the EndpointSlice writes whose problems were reported
	budget       *endpointBudget // the endpoints each service keeps (guard.go)
	// useReports: the slices left out of, or not local to, an import,
	// reported once per pair of writes (sync).
	useReports *reportedWrites

	// The local cluster's own EndpointSlices (localslices.go), watched
	// once a service prefers the local cluster's endpoints.
	own *ownSlices

	// The local cluster (local.go): nil cluster when the Config names it.
	cluster        toolscache.SharedIndexInformer // the ClusterProperty that names it, by name
	clusterHandler toolscache.ResourceEventHandlerRegistration
	clusterID      atomic.Pointer[string] // what the ClusterProperty says; nil before it is read
	clusterSettled atomic.Bool            // the ClusterProperty is missing, or may not be read
	clusterAccess  *permission

	statsMu   sync.Mutex
	imports   map[string]int
	endpoints int

	why whyState // issue 43: why a name is empty, counts by source cluster (why.go)
}

const sliceByService = "service"

// New makes a controller over the given clients; Run starts it.
func New(dyn dynamic.Interface, imports ImportClient, kube kubernetes.Interface, cfg Config) *Controller {
	if cfg.Log == nil {
		cfg.Log = nopLogger{}
	}
	c := &Controller{
		cfg:          cfg,
		idx:          newIndex(cfg.Reverse, cfg.ReverseEndpoints),
		queue:        workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		imports:      map[string]int{},
		dyn:          dyn,
		siClient:     imports,
		lossReported: map[string]string{},

		sliceReports: newReportedWrites(),
		useReports:   newReportedWrites(),
		budget:       newEndpointBudget(cfg.maxEndpoints()),

		crdChanged: make(chan struct{}, 1),
		every:      pollDiscovery,
		denied:     deniedDiscovery,
		idle:       idleDiscovery,
		hurry:      hurryDiscovery,
	}
	c.serial.Store(uint32(time.Now().Unix()))
	c.permissions()
	if cfg.ClusterID == "" {
		c.cluster = c.newClusterWatch()
	}
	spec := &shape{name: "spec", versions: []string{V1beta1}, reported: newReportedWrites()}
	if cfg.Fallback {
		spec.versions = append(spec.versions, V1alpha1)
	}
	root := &shape{name: "root", versions: []string{V1alpha2}, reported: newReportedWrites()}
	c.shapes = []*shape{root, spec}
	c.served = discoveryServed(kube.Discovery())
	c.crd = c.newCRDWatch()

	c.slices = c.newSliceInformer(kube)
	c.own = newOwnSlices(c, kube)
	return c
}

// permissions sets up how refusals are told: of the ServiceImport and
// EndpointSlice watches, of the CRD's, and of the ClusterProperty's.
func (c *Controller) permissions() {
	c.access = &permission{retry: 5 * time.Second,
		denied: func(err error) {
			c.cfg.Log.Warningf("permission denied: the plugin needs list and watch on serviceimports.multicluster.x-k8s.io "+
				"and endpointslices.discovery.k8s.io (deploy/rbac.yaml); until it has them, not ready before the first sync, "+
				"and after it the answers stay as they were: %v", err)
		},
		granted: func(what string) { c.logf("%s: access granted", what) },
	}
	c.crdAccess = &permission{retry: crdDeniedRetry,
		denied: func(err error) {
			c.cfg.Log.Warningf("cannot watch the ServiceImport CRD, so API discovery is asked every %s to follow the versions served; "+
				"grant get, list and watch on customresourcedefinitions named %s (deploy/rbac.yaml) to make it ask only when the CRD changes: %v",
				deniedDiscovery, ServiceImportCRD, err)
		},
		granted: func(string) { c.logf("watching the ServiceImport CRD: discovery is now asked only when it changes") },
	}
	c.clusterAccess = &permission{retry: crdDeniedRetry,
		denied: func(err error) {
			c.clusterSettled.Store(true)
			c.logf("cannot read ClusterProperty %s, so the local cluster is unknown and headless services answer every cluster's endpoints; "+
				"grant get, list and watch on clusterproperties.about.k8s.io named %s (deploy/rbac.yaml), or set cluster_id: %v",
				ClusterIDProperty, ClusterIDProperty, err)
		},
		granted: func(string) { c.logf("reading ClusterProperty %s: access granted", ClusterIDProperty) },
		// Until the ServiceImport and EndpointSlice watches are allowed, a
		// refusal is as likely the API server's start-up as the rule
		// missing: only one that outlasts theirs is reported.
		starting: func() bool { return !c.access.refusals.granted.Load() },
	}
}

// sliceInformer is an informer of the EndpointSlices that selector
// selects, in every namespace, waiting out refusals and outages as the
// other watches do; what names it in logs.
func (c *Controller) sliceInformer(what string, kube kubernetes.Interface, selector string, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors(what, c.access, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).Watch(ctx, o)
		},
	}), kube), &discoveryv1.EndpointSlice{}, 0, indexers)
}

// newSliceInformer is the informer of the multi-cluster EndpointSlices,
// which keeps their slim copies, indexed by service.
func (c *Controller) newSliceInformer(kube kubernetes.Interface) toolscache.SharedIndexInformer {
	// Only multi-cluster slices are listed at all.
	inf := c.sliceInformer("EndpointSlices", kube, LabelServiceName, toolscache.Indexers{sliceByService: func(obj any) ([]string, error) {
		s := obj.(*Slice)
		if s.Service == "" {
			return nil, nil
		}
		return []string{key(s.Namespace, s.Service)}, nil
	}})
	_ = inf.SetTransform(func(obj any) (any, error) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return obj, nil
		}
		s := sliceFrom(es, c.cfg.DenyRanges)
		c.budget.fit(s)
		return s, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.reportWrite(c.sliceReports, KindEndpointSlice, obj)
			c.sliceChanged(nil, obj) // why.go: the cluster's last change
			c.enqueueSlice(obj)
		},
		UpdateFunc: func(old, obj any) {
			c.reportWrite(c.sliceReports, KindEndpointSlice, obj)
			c.sliceChanged(old, obj) // why.go: the cluster's last change
			c.enqueueSlice(old)
			c.enqueueSlice(obj)
		},
		DeleteFunc: func(obj any) {
			forgetDeleted(c.sliceReports, obj)
			forgetDeleted(c.useReports, obj)
			if s, ok := tombstone(obj).(*Slice); ok {
				c.budget.release(s.Namespace, s.Name)
			}
			c.sliceChanged(obj, nil) // why.go: the cluster's last change
			c.enqueueSlice(obj)
		},
	})
	return inf
}

// maxEndpoints is the cap on a service's endpoints, 0 for none.
func (cfg *Config) maxEndpoints() int {
	switch {
	case cfg.MaxEndpoints < 0:
		return 0
	case cfg.MaxEndpoints == 0:
		return DefaultMaxEndpoints
	}
	return cfg.MaxEndpoints
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
	slicesDone, crdDone, clusterDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	c.own.ctx = ctx
	go func() { defer close(slicesDone); c.slices.RunWithContext(ctx) }()
	go func() { defer close(crdDone); c.crd.RunWithContext(ctx) }()
	go func() {
		defer close(clusterDone)
		if c.cluster != nil {
			c.cluster.RunWithContext(ctx)
		}
	}()
	workerDone := make(chan struct{})
	defer func() {
		c.queue.ShutDown()
		if c.synced.Load() {
			<-workerDone
		}
		<-slicesDone
		<-crdDone
		<-clusterDone
		c.own.wait()
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
		if !c.synced.Load() && complete && c.slices.HasSynced() && c.clusterKnown() {
			// Build everything once before answering, so the first answers
			// are whole. An event from now on is queued: the stores hold
			// every earlier one, and syncAll reads them.
			c.live.Store(true)
			c.syncAll()
			c.own.settle(ctx) // services that prefer local endpoints answer them from the first
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

func (c *Controller) logf(format string, args ...any) { c.cfg.Log.Infof(format, args...) }

// nopLogger is the Logger of a Config that names none.
type nopLogger struct{}

func (nopLogger) Infof(string, ...any)    {}
func (nopLogger) Warningf(string, ...any) {}

// HasSynced reports whether every watch has listed and the first answers are built.
func (c *Controller) HasSynced() bool { return c.synced.Load() }

// Lookup returns the answers of the service "<name>.<namespace>", or nil.
func (c *Controller) Lookup(nameDotNamespace string) *Service { return c.idx.get(nameDotNamespace) }

// LookupIP returns the services named at ip in reverse zones: those whose
// ClusterSetIPs hold it, and headless ones with a ready endpoint at it.
func (c *Controller) LookupIP(ip netip.Addr) []*Service { return c.idx.lookupIP(ip) }

// HasNamespace reports whether any service of the namespace has answers.
func (c *Controller) HasNamespace(ns string) bool { return c.idx.hasNamespace(ns) }

// Each calls f for every service with answers until f returns false.
func (c *Controller) Each(f func(*Service) bool) { c.idx.each(f) }

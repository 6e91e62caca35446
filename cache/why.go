package cache

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Why a name is empty, and which source clusters its answers come from
// (issue 43).
//
// A headless service answers only from EndpointSlices. When none is there,
// its name answers nothing, and without a word that looks like any other
// NXDOMAIN. Two reasons say why, counted in the skipped metric and logged
// once, under the kind of the import (ImportKind):
//
//   - ReasonEndpointSlicesAbsent: the headless import's status says
//     endpointSliceObjects: Absent (sigs.k8s.io/mcs-api v0.5.1 and later, in
//     both versions of the spec shape; the root shape has no such field):
//     the MCS implementation does not sync this service's EndpointSlices
//     (Cilium syncs them only for headless or annotated services). It is a
//     problem of the import, reported, as every other, once per write of it.
//   - ReasonNoEndpointSlices: a headless import answered nothing and no
//     EndpointSlice at all is labelled with its service (a slice that is
//     there but unusable, or of a cluster the import does not list, is
//     reported under its own reason). An implementation writes an import's
//     slices a moment after the import, so this is reported only once the
//     name has stayed so for emptyGrace; then once per write of the import
//     while it stays empty, and again should it go empty again later.
//
// The answered endpoint names are counted by source cluster (account), and
// the time of the last change seen of each source cluster's EndpointSlices
// is kept (sliceChanged), for the endpoints gauge's cluster label and the
// last-change gauge. Cluster IDs come from labels any exporting cluster
// writes: only clusters with answered endpoints (or with slices) are
// counted, a cluster is dropped as soon as it has none, and at most
// MaxClusterSeries of them are published apart (capClusters).

// Reasons a headless name answers nothing.
const (
	ReasonNoEndpointSlices     = "no_endpointslices"
	ReasonEndpointSlicesAbsent = "endpointslices_absent"
)

// emptyGrace is how long a headless import must have had no EndpointSlice
// before that is reported: implementations write an import first and its
// slices a moment later. A variable for tests.
var emptyGrace = 5 * time.Second

// MaxClusterSeries is the most source clusters published apart in Stats:
// cluster IDs are untrusted input, and each is a series of two gauges. The
// clusters after the first MaxClusterSeries-1, in name order, are published
// together as OtherClusters.
const MaxClusterSeries = 256

// OtherClusters stands for the clusters past MaxClusterSeries: not a
// cluster ID (an RFC 1123 subdomain has no '_').
const OtherClusters = "_other"

// EmptySeries are the kind and reason of every skipped series that says why
// a name is empty, so that each exists from start-up, at zero: beside
// SkipSeries.
func EmptySeries() [][2]string {
	var out [][2]string
	for _, v := range Versions {
		out = append(out, [2]string{ImportKind(v), ReasonNoEndpointSlices})
		if v != V1alpha2 { // the root shape has no endpointSliceObjects
			out = append(out, [2]string{ImportKind(v), ReasonEndpointSlicesAbsent})
		}
	}
	return out
}

// whyState is the controller's part for this file.
type whyState struct {
	// empty are the headless services answered nothing for lack of any
	// EndpointSlice; sync's alone (under syncMu).
	empty map[string]emptyName

	// byCluster counts the answered ready endpoint names by source cluster;
	// under the Controller's statsMu, with its other counts.
	byCluster map[string]int

	mu      sync.Mutex
	slices  map[string]int       // the EndpointSlices of each source cluster, in the namespaces answered
	changed map[string]time.Time // when a slice of each source cluster was last seen added, changed or deleted

	pubMu sync.Mutex // one publishStats at a time, so that an older count never overwrites a newer one
}

// emptyName is a headless service without EndpointSlices.
type emptyName struct {
	since    time.Time // seen so since
	rv       string    // the import's resourceVersion when last seen
	reported bool      // reported at rv
}

// whyEmpty notes what sync made of the service k: next from im. A headless
// import with data that answers nothing, and has no EndpointSlice at all, is
// reported as ReasonNoEndpointSlices once it has stayed so for emptyGrace
// (the service is queued again to check), unless the import says its
// slices are absent, which it was reported for already.
func (c *Controller) whyEmpty(k string, im *Import, next *Service) {
	if next != nil || im == nil || !im.HasData || !im.Headless || slices.Contains(im.Problems(), ReasonEndpointSlicesAbsent) {
		delete(c.why.empty, k)
		return
	}
	if objs, _ := c.slices.GetIndexer().ByIndex(sliceByService, k); len(objs) > 0 {
		delete(c.why.empty, k) // slices there, none of them usable: each says why
		return
	}
	now := time.Now()
	e, ok := c.why.empty[k]
	if !ok {
		e.since = now
	}
	if e.rv != im.ResourceVersion {
		e.rv, e.reported = im.ResourceVersion, false
	}
	if wait := emptyGrace - now.Sub(e.since); wait > 0 {
		c.queue.AddAfter(k, wait)
	} else if !e.reported {
		e.reported = true
		ns, name := splitKey(k)
		kind := ImportKind(im.Version())
		c.cfg.Log.Warningf("%s: %s: headless, and no EndpointSlice labelled %s=%s in its namespace: its name answers nothing",
			describe(kind, ns, name), ReasonNoEndpointSlices, LabelServiceName, name)
		if c.cfg.OnSkip != nil {
			c.cfg.OnSkip(kind, ReasonNoEndpointSlices)
		}
	}
	if c.why.empty == nil {
		c.why.empty = map[string]emptyName{}
	}
	c.why.empty[k] = e
}

// clusterOf is the source cluster of an endpoint name "<host>.<cluster>":
// a host is one label, a cluster ID may have several.
func clusterOf(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// accountClusters adds d times the endpoint names of s to the counts by
// cluster; the caller holds statsMu. A cluster whose count reaches zero is
// dropped.
func (c *Controller) accountClusters(s *Service, d int) {
	if s.more == nil || len(s.more.endpoints) == 0 {
		return
	}
	if c.why.byCluster == nil {
		c.why.byCluster = map[string]int{}
	}
	for _, e := range s.more.endpoints {
		cl := clusterOf(e.name)
		if n := c.why.byCluster[cl] + d; n != 0 {
			c.why.byCluster[cl] = n
		} else {
			delete(c.why.byCluster, cl)
		}
	}
}

// sliceChanged notes, at the time an informer delivers it, a change of an
// EndpointSlice: old is nil for an add, obj nil for a delete (either may be a
// tombstone). A relist's update, which holds the same write again, is no
// change. Only slices with a usable source cluster, in the namespaces
// answered, count; a cluster is forgotten once it has no slice left.
func (c *Controller) sliceChanged(old, obj any) {
	before, _ := tombstone(old).(*Slice)
	after, _ := tombstone(obj).(*Slice)
	if before != nil && after != nil && after.ResourceVersion != "" && before.ResourceVersion == after.ResourceVersion {
		return
	}
	counted := func(s *Slice) string {
		if s == nil || s.Cluster == "" || !c.answers(s.Namespace) {
			return ""
		}
		return s.Cluster
	}
	from, to := counted(before), counted(after)
	if from == "" && to == "" {
		return
	}
	now := time.Now()
	w := &c.why
	w.mu.Lock()
	if w.slices == nil {
		w.slices, w.changed = map[string]int{}, map[string]time.Time{}
	}
	if from != "" {
		if w.slices[from]--; w.slices[from] <= 0 {
			delete(w.slices, from)
			delete(w.changed, from)
		} else {
			w.changed[from] = now
		}
	}
	if to != "" {
		w.slices[to]++
		w.changed[to] = now
	}
	w.mu.Unlock()
	c.publishStatsIfSynced()
}

// clusterStats fills in the counts by cluster of st: the caller holds
// statsMu.
func (c *Controller) clusterStats(st *Stats) {
	st.EndpointsByCluster = capClusters(c.why.byCluster, func(a, b int) int { return a + b })
	c.why.mu.Lock()
	st.ClusterChanged = capClusters(c.why.changed, func(a, b time.Time) time.Time {
		if a.After(b) {
			return a
		}
		return b
	})
	c.why.mu.Unlock()
}

// capClusters copies m, keeping at most MaxClusterSeries keys: past that,
// the clusters after the first MaxClusterSeries-1 in name order are merged
// under OtherClusters.
func capClusters[V any](m map[string]V, merge func(a, b V) V) map[string]V {
	out := make(map[string]V, min(len(m), MaxClusterSeries))
	if len(m) <= MaxClusterSeries {
		maps.Copy(out, m)
		return out
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i < MaxClusterSeries-1 {
			out[k] = m[k]
		} else if v, ok := out[OtherClusters]; ok {
			out[OtherClusters] = merge(v, m[k])
		} else {
			out[OtherClusters] = m[k]
		}
	}
	return out
}

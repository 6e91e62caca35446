package cache

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// syncAll rebuilds every service known to any view, slice or answer, here
// rather than through the queue: client-go's workqueue keeps a set of the
// keys waiting, and a Go map never gives back the room it grew to, so a
// queue that once held every key would keep tens of bytes per service for
// the life of the process.
func (c *Controller) syncAll() {
	keys := map[string]struct{}{}
	c.viewsMu.RLock()
	for _, v := range c.views {
		for _, k := range v.imports.keys() { // the strings the store holds: the index will share them
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

// sync rebuilds the answers of one service from the views' imports and the slices.
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
		if n, ok := c.normalize(k, im); ok {
			if prev != nil && prev.inputs().equal(n) {
				if prev.rec != im {
					// Same answers from a newer import, or from another
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
			next = build(im, n, c.cfg.Zones, c.cfg.TTL, c.cfg.Selectors)
		}
	} else {
		c.own.prefer(k, false)
	}
	c.whyEmpty(k, im, next) // why.go: say why a headless name is empty
	if prev == nil && next == nil {
		return
	}
	c.idx.put(k, next)
	c.bumpSerial()
	c.account(prev, -1)
	c.account(next, +1)
	c.publishStatsIfSynced()
}

// normalize gathers the inputs of the service k, answered from im, and
// reports the slices that do not count as what they claim: those of a
// cluster the import does not list, and those that claim the local cluster
// for endpoints its own Service does not have (localslices.go).
func (c *Controller) normalize(k string, im *Import) (normalized, bool) {
	local := c.cfg.localFor(im, c.localCluster())
	proven, listed := c.own.prefer(k, local != "")
	if !im.Headless {
		return normalize(im, nil, local, "", proven)
	}
	var viewSlices []*Slice
	objs, _ := c.slices.GetIndexer().ByIndex(sliceByService, k)
	for _, o := range objs {
		s := o.(*Slice)
		if s.Cluster != "" && !im.lists(s.Cluster) {
			c.reportUse(s, im, ReasonUnlistedCluster)
			continue // not used: nothing else of it to check
		}
		viewSlices = append(viewSlices, s)
	}
	viewSlices, cut := fitNames(im, viewSlices, c.cfg.Zones)
	for _, s := range cut {
		c.reportUse(s, im, ReasonNameTooLong)
	}
	if listed {
		proof := proven
		proven = func(s *Slice, e Endpoint) bool {
			ok := proof(s, e)
			if !ok {
				c.reportUse(s, im, ReasonUnprovenLocal)
			}
			return ok
		}
	}
	return normalize(im, viewSlices, local, c.cfg.LocalZone, proven)
}

// answers reports whether the configuration answers the namespace: it is
// selected, and not protected.
func (c *Controller) answers(namespace string) bool {
	return c.selects(namespace) && !c.cfg.protected(namespace)
}

// selects reports whether the namespaces option lets the namespace in.
func (c *Controller) selects(namespace string) bool {
	return len(c.cfg.Namespaces) == 0 || slices.Contains(c.cfg.Namespaces, namespace)
}

// reportUse reports, once per write of the slice and of the import, that
// the slice s is not used as it claims for the import im: reason says why.
func (c *Controller) reportUse(s *Slice, im *Import, reason string) {
	if c.useReports.noteReason(s.objectKey(), reason, s.ResourceVersion+" "+im.ResourceVersion) {
		c.report(KindEndpointSlice, s.Namespace, s.Name, []string{reason})
	}
}

// choose picks the import a service is answered from (chooseImport, in
// choose.go, says how) and reports a loss of its data once per write, not on
// every rebuild of the service.
func (c *Controller) choose(k string, prev *Service) *Import {
	var buf [4]viewImport // two shapes, each with a view in place and one starting
	views := c.viewImports(k, buf[:0])
	unread := c.mayBeUnread(k, views, prev)
	switch verdict, at := judgeLoss(views, prev, unread); {
	case verdict == lost && c.lossReported[k] != at:
		c.lossReported[k] = at
		ns, name := splitKey(k)
		c.report(KindServiceImport, ns, name, []string{ReasonDataLost})
	case verdict == notLost:
		delete(c.lossReported, k)
	}
	return chooseImport(views, prev, unread)
}

// mayBeUnread reports whether a shape that no answering view reads may hold
// the data of the service k, answered (prev) and now read empty by every
// answering view: a view is starting, or discovery has not been asked and
// answered since the service was first seen so (the data may have gone
// through a version that has just started being served, which only
// discovery tells). While it does the key stays in c.kept, so that the end
// of the next discovery rebuilds it, and discovery is asked at once
// (dataLeft). A discovery asked after the service was first seen so starts
// a view of every shape it shows served: once none is starting, every shape
// served is read by an answering view, and none holds the data.
func (c *Controller) mayBeUnread(k string, views []viewImport, prev *Service) bool {
	a := agree(views)
	if prev == nil || !a.readEmpty() || a.views == len(c.shapes) {
		// Data, a delete, or every shape read: the views decide.
		c.kept.forget(k)
		return false
	}
	since := c.kept.note(k, c.discoAsked.Load())
	switch {
	case a.starting > 0:
		return true
	case c.discoSeen.Load() > since:
		c.kept.forget(k)
		return false
	case c.discoAsked.Load() <= since:
		c.dataLeft()
	}
	return true
}

// keptAnswers are the services whose answer is kept while a shape may be
// unread (mayBeUnread), each with the number of discoveries asked when it
// was first kept. note and forget are sync's (under syncMu), keys the end
// of a discovery's. A migration may keep many for a moment: the map is
// dropped once empty, since a Go map never gives back the room it grew to.
type keptAnswers struct {
	mu       sync.Mutex
	m        map[string]uint64
	nonEmpty atomic.Bool // m is not empty: forget needs no lock on every rebuild otherwise
}

// note keeps k, asked being the discoveries asked now, and returns the
// number it was first kept with.
func (ka *keptAnswers) note(k string, asked uint64) uint64 {
	ka.mu.Lock()
	defer ka.mu.Unlock()
	if n, ok := ka.m[k]; ok {
		return n
	}
	if ka.m == nil {
		ka.m = map[string]uint64{}
	}
	ka.m[k] = asked
	ka.nonEmpty.Store(true)
	return asked
}

func (ka *keptAnswers) forget(k string) {
	if !ka.nonEmpty.Load() {
		return
	}
	ka.mu.Lock()
	delete(ka.m, k)
	if len(ka.m) == 0 {
		ka.m = nil
		ka.nonEmpty.Store(false)
	}
	ka.mu.Unlock()
}

func (ka *keptAnswers) keys() []string {
	ka.mu.Lock()
	defer ka.mu.Unlock()
	return slices.Collect(maps.Keys(ka.m))
}

// viewImports appends to out what every view holds of the service k: the
// answering views first, in shape order, then those starting.
func (c *Controller) viewImports(k string, out []viewImport) []viewImport {
	held := func(v *view, role viewRole) viewImport {
		return viewImport{version: v.version, role: role, im: v.imports.get(k)}
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

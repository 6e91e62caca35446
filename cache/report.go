package cache

import (
	"strings"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// Problems with an object (the parts of it that are not used) are reported,
// in the log and through Config.OnSkip (the skipped_objects_total metric),
// once per write of the object, and only in the namespaces the configuration
// answers.
//
// They are reported from the informers' event handlers, not from their
// transforms: a transform sees every object again on every relist (after an
// expired watch, say), and sees deletes as well, without telling them apart.
// A handler is told adds, updates and deletes, and each view's handler is
// called in the order of the view's events. What was reported is remembered
// per object, by the resourceVersion of the write: a relist delivers the
// same resourceVersion again, and is not reported again; a new write is.

// reportedWrites remembers, for every object whose problems were reported,
// the resourceVersion of the write they were reported for. It holds only
// objects with problems, and forgets them when they are deleted, so it stays
// as small as the set of unusable objects. The views of one shape share one:
// while a view takes over from another (v1beta1 from v1alpha1), both deliver
// the same writes, and each write is reported by whichever comes first.
type reportedWrites struct {
	mu sync.Mutex
	at map[string]string // the object's key in its store → resourceVersion reported
}

func newReportedWrites() *reportedWrites { return &reportedWrites{at: map[string]string{}} }

// note imports a write of the object key at resourceVersion rv, and says
// whether its problems are still to be reported: not when that write was the
// last reported (a relist), nor when it is older than that (a view lagging
// behind the other view of its shape). A write without problems is forgotten,
// so that a later write with problems is reported.
func (w *reportedWrites) note(key, rv string, problems bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !problems {
		delete(w.at, key)
		return false
	}
	if last, ok := w.at[key]; ok && (last == rv || newer(last, rv)) {
		return false
	}
	w.at[key] = rv
	return true
}

// noteReason is note for the uses of a slice: it says whether reason is
// still to be reported for the write at (the slice's and its import's
// resourceVersions). The reasons reported for one write are kept together,
// so that a slice with two reasons has each reported once, not again each
// time the other is; those of an older write are dropped.
func (w *reportedWrites) noteReason(key, reason, at string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	token := reason + " " + at
	var keep []string
	for t := range strings.SplitSeq(w.at[key], "\n") {
		if t == token {
			return false
		}
		if t != "" && strings.HasSuffix(t, " "+at) {
			keep = append(keep, t)
		}
	}
	w.at[key] = strings.Join(append(keep, token), "\n")
	return true
}

// forget drops what is remembered of the object key: it was deleted, and
// should it be created again, its problems are reported again.
func (w *reportedWrites) forget(key string) {
	w.mu.Lock()
	delete(w.at, key)
	w.mu.Unlock()
}

// keepOnly forgets every object for which held is false; nil forgets all.
func (w *reportedWrites) keepOnly(held func(key string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.at {
		if held == nil || !held(k) {
			delete(w.at, k)
		}
	}
}

// size is the number of objects remembered.
func (w *reportedWrites) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.at)
}

// reportWrite reports the problems of the object an informer added or
// updated, unless the namespaces option leaves its namespace out or w says
// this write was reported already. An import with data in a protected
// namespace is reported as such, and nothing else of it.
func (c *Controller) reportWrite(w *reportedWrites, kind string, obj any) {
	var meta *Meta
	var problems []string
	var k string // the object's key in its store
	switch r := obj.(type) {
	case *Import:
		meta, problems = &r.Meta, r.Problems()
		k = key(meta.Namespace, meta.Name) // a view's imports: "<name>.<namespace>"
	case *Slice:
		meta, problems = &r.Meta, r.Problems
		k = meta.objectKey() // the informer's, which forgetDeleted gets from a tombstone
	default:
		return
	}
	if !c.selects(meta.Namespace) {
		return
	}
	if c.cfg.protected(meta.Namespace) {
		// Not answered, whatever it holds: said once, for the import with data.
		im, ok := obj.(*Import)
		if !ok || !im.HasData {
			return
		}
		problems = []string{ReasonProtectedNamespace}
	}
	if w.note(k, meta.ResourceVersion, len(problems) > 0) {
		c.report(kind, meta.Namespace, meta.Name, problems)
	}
}

// forgetDeleted forgets the object an informer deleted (obj may be a
// tombstone, whose key is all there is to go by).
func forgetDeleted(w *reportedWrites, obj any) {
	if k, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		w.forget(k)
	}
}

// report logs each problem of the named object and counts it through OnSkip.
func (c *Controller) report(kind, namespace, name string, problems []string) {
	for _, p := range problems {
		c.cfg.Log.Warningf("%s: %s: not used in part or whole", describe(kind, namespace, name), p)
		if c.cfg.OnSkip != nil {
			c.cfg.OnSkip(kind, p)
		}
	}
}

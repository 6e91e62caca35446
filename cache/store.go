package cache

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"
)

// importStore is a view's store: the reflector of the view's watch writes
// into it, and it keeps the import of each ServiceImport, keyed as the index
// is ("<name>.<namespace>"), and tells the controller of every change.
//
// It stands where a SharedIndexInformer would, whose store, DeltaFIFO and
// handler queue pass each event between three goroutines and whose store
// keeps a key of its own per object; here one map holds the imports, its
// keys are the index's, and the change reaches the controller on the
// reflector's goroutine, in the order of the watch. A relist tells only of
// what changed: a import whose resourceVersion is the one held is not news.
//
// An object the view reads blank (no data, nothing dropped: with this
// project's CRD, every object of the other shape) is kept as its
// resourceVersion alone, which is all that deciding between the views needs
// of it (choose.go): about 60 bytes where an Import and its strings take
// about 190, and a cluster with both shapes served reads every object blank
// through one of its two views (BenchmarkMemoryPerImport/10000/two-shapes).
//
// It implements client-go's Store, and TransformingStore so that a streaming
// list (WatchList) keeps imports, not whole objects, until it is complete.
type importStore struct {
	apiVersion string                        // the view's
	read       func(obj any) (*Import, bool) // the import of an object of the view's type
	// changed is called after each change, outside the lock: cur is nil when
	// the import was deleted; held says whether the store held the object
	// before.
	changed func(k string, held bool, cur *Import)

	mu     sync.RWMutex
	m      map[string]*Import // imports with data, or with something dropped
	blank  map[string]string  // the resourceVersions of the objects read blank
	synced atomic.Bool        // the first list is stored, and its changes told
}

func newImportStore(apiVersion string, read func(obj any) (*Import, bool), changed func(k string, held bool, cur *Import)) *importStore {
	return &importStore{apiVersion: apiVersion, read: read, changed: changed, m: map[string]*Import{}, blank: map[string]string{}}
}

// isBlank reports whether im holds nothing but its object's name and
// resourceVersion and the version it was read through, and its key gives
// the name back (splitKey).
func (im *Import) isBlank() bool {
	return !im.HasData && im.extra == nil && len(im.IPs) == 0 && len(im.Ports) == 0 && !im.Headless && !im.PreferClose &&
		!strings.Contains(im.Name, ".")
}

var _ toolscache.TransformingStore = (*importStore)(nil)

// import is the import of obj: an object from a watch or a list, or a import
// the streaming list has already made.
func (s *importStore) slim(obj any) (*Import, error) {
	if im, ok := obj.(*Import); ok {
		return im, nil
	}
	if im, ok := s.read(obj); ok {
		return im, nil
	}
	return nil, fmt.Errorf("a ServiceImport store cannot hold a %T", obj)
}

// Transformer makes imports of the objects of a streaming list.
func (s *importStore) Transformer() toolscache.TransformFunc {
	return func(obj any) (any, error) { return s.slim(obj) }
}

func (s *importStore) Add(obj any) error    { return s.put(obj) }
func (s *importStore) Update(obj any) error { return s.put(obj) }

func (s *importStore) put(obj any) error {
	im, err := s.slim(obj)
	if err != nil {
		return err
	}
	k := key(im.Namespace, im.Name)
	s.mu.Lock()
	held := s.remove(k)
	if im.isBlank() {
		s.blank[k] = im.ResourceVersion
	} else {
		s.m[k] = im
	}
	s.mu.Unlock()
	s.changed(k, held, im)
	return nil
}

// remove forgets the object k and reports whether it was held; s.mu is held.
func (s *importStore) remove(k string) bool {
	_, inM := s.m[k]
	_, inBlank := s.blank[k]
	delete(s.m, k)
	delete(s.blank, k)
	return inM || inBlank
}

func (s *importStore) Delete(obj any) error {
	im, err := s.slim(tombstone(obj))
	if err != nil {
		return err
	}
	k := key(im.Namespace, im.Name)
	s.mu.Lock()
	held := s.remove(k)
	s.mu.Unlock()
	if held {
		s.changed(k, true, nil)
	}
	return nil
}

// Replace puts list in place of what is held, after a list or relist, and
// tells of the imports that are new, changed or gone.
func (s *importStore) Replace(list []any, _ string) error {
	imports := make([]*Import, len(list))
	blanks := 0
	for i, obj := range list {
		im, err := s.slim(obj)
		if err != nil {
			return err
		}
		imports[i] = im
		if im.isBlank() {
			blanks++
		}
	}
	// Maps made to their size: one grown to it may take twice the room.
	next := &importStore{m: make(map[string]*Import, len(list)-blanks), blank: make(map[string]string, blanks)}
	keys := make([]string, len(list))
	for i, im := range imports {
		keys[i] = key(im.Namespace, im.Name)
		if im.isBlank() {
			next.blank[keys[i]] = im.ResourceVersion
		} else {
			next.m[keys[i]] = im
		}
	}
	s.mu.Lock()
	old := &importStore{m: s.m, blank: s.blank}
	s.m, s.blank = next.m, next.blank
	s.mu.Unlock()
	for i, k := range keys {
		if rv, held := old.version(k); !held || rv != imports[i].ResourceVersion {
			s.changed(k, held, imports[i])
		}
	}
	for _, k := range old.keys() {
		if _, held := next.version(k); !held {
			s.changed(k, true, nil)
		}
	}
	s.synced.Store(true)
	return nil
}

// version returns the resourceVersion of the object k, and whether it is
// held; s.mu is held, or s is not shared.
func (s *importStore) version(k string) (string, bool) {
	if im, ok := s.m[k]; ok {
		return im.ResourceVersion, true
	}
	rv, ok := s.blank[k]
	return rv, ok
}

func (s *importStore) Resync() error { return nil }

// get returns the import of the service k ("<name>.<namespace>"), or nil;
// of an object read blank, an import made again from its key.
func (s *importStore) get(k string) *Import {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.importOf(k)
}

// importOf is get's; s.mu is held.
func (s *importStore) importOf(k string) *Import {
	if im, ok := s.m[k]; ok {
		return im
	}
	rv, ok := s.blank[k]
	if !ok {
		return nil
	}
	ns, name := splitKey(k)
	return blankImport(Meta{Namespace: ns, Name: name, ResourceVersion: rv}, s.apiVersion)
}

// keys returns the keys of every object held, the strings the maps hold.
func (s *importStore) keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.m)+len(s.blank))
	for k := range s.m {
		out = append(out, k)
	}
	for k := range s.blank {
		out = append(out, k)
	}
	return out
}

// List, ListKeys, Get and GetByKey complete client-go's Store.

func (s *importStore) List() []any {
	keys := s.keys()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		if im := s.importOf(k); im != nil {
			out = append(out, im)
		}
	}
	return out
}

func (s *importStore) ListKeys() []string { return s.keys() }

func (s *importStore) Get(obj any) (any, bool, error) {
	im, err := s.slim(obj)
	if err != nil {
		return nil, false, err
	}
	return s.GetByKey(key(im.Namespace, im.Name))
}

func (s *importStore) GetByKey(k string) (any, bool, error) {
	if im := s.get(k); im != nil {
		return im, true, nil
	}
	return nil, false, nil
}

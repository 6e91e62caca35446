package cache

import (
	"fmt"
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
// It implements client-go's Store, and TransformingStore so that a streaming
// list (WatchList) keeps imports, not whole objects, until it is complete.
type importStore struct {
	read func(obj any) (*Import, bool) // the import of an object of the view's type
	// changed is called after each change, outside the lock: cur is nil when
	// the import was deleted, old when it is new.
	changed func(k string, old, cur *Import)

	mu     sync.RWMutex
	m      map[string]*Import
	synced atomic.Bool // the first list is stored, and its changes told
}

func newImportStore(read func(obj any) (*Import, bool), changed func(k string, old, cur *Import)) *importStore {
	return &importStore{read: read, changed: changed, m: map[string]*Import{}}
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
	old := s.m[k]
	s.m[k] = im
	s.mu.Unlock()
	s.changed(k, old, im)
	return nil
}

func (s *importStore) Delete(obj any) error {
	im, err := s.slim(tombstone(obj))
	if err != nil {
		return err
	}
	k := key(im.Namespace, im.Name)
	s.mu.Lock()
	old, ok := s.m[k]
	delete(s.m, k)
	s.mu.Unlock()
	if ok {
		s.changed(k, old, nil)
	}
	return nil
}

// Replace puts list in place of what is held, after a list or relist, and
// tells of the imports that are new, changed or gone.
func (s *importStore) Replace(list []any, _ string) error {
	next := make(map[string]*Import, len(list))
	for _, obj := range list {
		im, err := s.slim(obj)
		if err != nil {
			return err
		}
		next[key(im.Namespace, im.Name)] = im
	}
	s.mu.Lock()
	old := s.m
	s.m = next
	s.mu.Unlock()
	for k, im := range next {
		if o := old[k]; o == nil || o.ResourceVersion != im.ResourceVersion {
			s.changed(k, o, im)
		}
	}
	for k, o := range old {
		if _, ok := next[k]; !ok {
			s.changed(k, o, nil)
		}
	}
	s.synced.Store(true)
	return nil
}

func (s *importStore) Resync() error { return nil }

// get returns the import of the service k ("<name>.<namespace>"), or nil.
func (s *importStore) get(k string) *Import {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[k]
}

// keys returns the keys of every import, the strings the map holds.
func (s *importStore) keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	return out
}

// List, ListKeys, Get and GetByKey complete client-go's Store.

func (s *importStore) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.m))
	for _, im := range s.m {
		out = append(out, im)
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

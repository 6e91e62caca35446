package cache

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A view's store tells the controller of each change, and a relist of only
// what changed: new, updated (another resourceVersion) or gone.
func TestImportStoreTellsChanges(t *testing.T) {
	var told []string
	s := newImportStore(func(obj any) (*Import, bool) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return readUnstructured(u, V1alpha2), true
		}
		return nil, false
	},
		func(k string, old, cur *Import) {
			switch {
			case old == nil:
				told = append(told, "add "+k+"@"+cur.ResourceVersion)
			case cur == nil:
				told = append(told, "delete "+k)
			default:
				told = append(told, "update "+k+"@"+cur.ResourceVersion)
			}
		})
	want := func(step string, w ...string) {
		t.Helper()
		slices.Sort(told)
		if fmt.Sprint(told) != fmt.Sprint(w) {
			t.Errorf("%s: told %q, want %q", step, told, w)
		}
		told = nil
	}
	a1, b1 := v2("ns", "a", "1", "ClusterSetIP", "10.0.0.1"), v2("ns", "b", "2", "ClusterSetIP", "10.0.0.2")
	if err := s.Replace([]any{a1, b1}, "2"); err != nil {
		t.Fatal(err)
	}
	want("list", "add a.ns@1", "add b.ns@2")
	if !s.synced.Load() || s.get("a.ns") == nil || s.get("a.ns").IPs[0].String() != "10.0.0.1" {
		t.Fatalf("after the list: synced %v, a.ns %v", s.synced.Load(), s.get("a.ns"))
	}
	// A relist: a unchanged, b updated, c new, and d, never seen, absent.
	c3 := v2("ns", "c", "3", "ClusterSetIP", "10.0.0.3")
	if err := s.Replace([]any{a1, v2("ns", "b", "4", "ClusterSetIP", "10.0.0.4"), c3}, "4"); err != nil {
		t.Fatal(err)
	}
	want("relist", "add c.ns@3", "update b.ns@4")
	if err := s.Replace([]any{c3}, "5"); err != nil {
		t.Fatal(err)
	}
	want("relist without a and b", "delete a.ns", "delete b.ns")
	if err := s.Update(v2("ns", "c", "6", "ClusterSetIP", "10.0.0.6")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(c3); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a1); err != nil { // not held: nothing to tell
		t.Fatal(err)
	}
	want("watch", "delete c.ns", "update c.ns@6")
	if err := s.Add("not an object"); err == nil {
		t.Error("a string was stored")
	}
	if keys := s.ListKeys(); len(keys) != 0 || len(s.List()) != 0 {
		t.Errorf("left: %v", keys)
	}
}

// A hundred thousand imports and services are held: their size is the
// memory target's (issue 15) first term, so a field that grows them shows here.
func TestSlimSizes(t *testing.T) {
	if got := unsafe.Sizeof(Import{}); got != 112 {
		t.Errorf("an Import takes %d bytes, want 112", got)
	}
	if got := unsafe.Sizeof(Service{}); got != 16 {
		t.Errorf("a Service takes %d bytes, want 16", got)
	}
}

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
	s := newImportStore(V1alpha2, func(obj any) (*Import, bool) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return readUnstructured(u, V1alpha2), true
		}
		return nil, false
	},
		func(k string, held bool, cur *Import) {
			switch {
			case !held:
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

// An object read blank is kept as its resourceVersion alone, held and told
// of as any other, and given back as a blank import of the view's version;
// one that gains data, or has something dropped, is kept whole.
func TestImportStoreBlank(t *testing.T) {
	var told []string
	s := newImportStore(V1alpha2, func(obj any) (*Import, bool) {
		return readUnstructured(obj.(*unstructured.Unstructured), V1alpha2), true
	}, func(k string, held bool, cur *Import) {
		told = append(told, fmt.Sprintf("%s held=%v gone=%v", k, held, cur == nil))
	})
	blankB, dotted := v2("ns", "b", "2", ""), v2("ns", "c.d", "3", "")
	if err := s.Replace([]any{v2("ns", "a", "1", "ClusterSetIP", "10.0.0.1"), blankB, dotted}, "3"); err != nil {
		t.Fatal(err)
	}
	if len(s.m) != 2 || len(s.blank) != 1 || s.blank["b.ns"] != "2" {
		t.Fatalf("after the list: whole %v, blank %v; want a.ns and c.d.ns whole (a name with a dot does not split back), b.ns blank at 2", s.m, s.blank)
	}
	if im := s.get("b.ns"); im == nil || im.HasData || im.Namespace != "ns" || im.Name != "b" || im.ResourceVersion != "2" || im.Version() != V1alpha2 {
		t.Fatalf("b.ns gives %+v, want a blank v1alpha2 import of ns/b at 2", im)
	}
	if keys := s.ListKeys(); len(keys) != 3 || len(s.List()) != 3 {
		t.Errorf("keys %v, want three", keys)
	}
	told = nil
	if err := s.Replace([]any{v2("ns", "a", "1", "ClusterSetIP", "10.0.0.1"), blankB, dotted}, "4"); err != nil {
		t.Fatal(err)
	}
	if len(told) != 0 {
		t.Errorf("a relist of the same objects told %q", told)
	}
	// b gains data, then is read blank again, then deleted.
	for _, obj := range []*unstructured.Unstructured{v2("ns", "b", "5", "ClusterSetIP", "10.0.0.5"), v2("ns", "b", "6", "")} {
		if err := s.Update(obj); err != nil {
			t.Fatal(err)
		}
		if _, whole := s.m["b.ns"]; whole != (obj.GetResourceVersion() == "5") {
			t.Errorf("at %s: b.ns whole %v", obj.GetResourceVersion(), whole)
		}
	}
	if err := s.Delete(v2("ns", "b", "6", "")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"b.ns held=true gone=false", "b.ns held=true gone=false", "b.ns held=true gone=true"}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("told %q, want %q", told, want)
	}
	if s.get("b.ns") != nil || len(s.blank) != 0 {
		t.Errorf("b.ns still held: %v", s.blank)
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

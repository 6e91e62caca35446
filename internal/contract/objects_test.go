package contract

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReadObjects reads the *.yaml and *.yml files of a directory, in name
// order, skipping other files, subdirectories and empty documents, and puts
// Namespaces first, CustomResourceDefinitions second and the rest in the
// order read.
func TestReadObjectsOrder(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.yaml": `
# a comment only
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s, namespace: ns1}
addressType: IPv4
endpoints: []
---
apiVersion: v1
kind: Namespace
metadata: {name: ns1}
---
`,
		"b.yml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: serviceimports.multicluster.x-k8s.io}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ns2}
data: {k: v}
`,
		"c.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: ns2}
`,
		"notes.txt":   "apiVersion: v1\nkind: Secret\nmetadata: {name: not-yaml}\n",
		"sub/d.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: in-a-subdirectory}\n",
		"e.yaml.orig": "apiVersion: v1\nkind: Secret\nmetadata: {name: a-backup}\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := ReadObjects(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, Describe(o))
	}
	want := []string{"Namespace ns1", "Namespace ns2", "CustomResourceDefinition serviceimports.multicluster.x-k8s.io",
		"EndpointSlice ns1/s", "ConfigMap ns2/c"}
	if !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	// Decoded whole, not only named.
	if v, _, _ := unstructured.NestedString(objs[3].Object, "addressType"); v != "IPv4" {
		t.Errorf("EndpointSlice addressType %q, want IPv4", v)
	}
	if v, _, _ := unstructured.NestedString(objs[4].Object, "data", "k"); v != "v" {
		t.Errorf("ConfigMap data.k %q, want v", v)
	}
	if gv := objs[2].GetAPIVersion(); gv != "apiextensions.k8s.io/v1" {
		t.Errorf("CRD apiVersion %q", gv)
	}
}

// A document ReadObjects cannot use is an error that names its file.
func TestReadObjectsNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Namespace\n"), 0o644); err != nil { // no name
		t.Fatal(err)
	}
	objs, err := ReadObjects(dir)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("objects %d, error %v; want an error naming %s", len(objs), err, bad)
	}
}

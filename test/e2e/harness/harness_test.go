package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Output of dig 9.18 with +noall +comments +answer +authority +additional.
const digOutput = `;; Got answer:
;; WARNING: .local is reserved for Multicast DNS
;; You are currently testing what happens when an mDNS query is leaked to DNS
;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 40060
;; flags: qr aa; QUERY: 1, ANSWER: 2, AUTHORITY: 0, ADDITIONAL: 2

;; OPT PSEUDOSECTION:
; EDNS: version: 0, flags:; udp: 1232
;; ANSWER SECTION:
_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV	0 50 5432 db-0.west.db.demo.svc.clusterset.local.
_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV	0 50 5432 fd00-2--23.east.prod.db.demo.svc.clusterset.local.

;; AUTHORITY SECTION:
clusterset.local.	5	IN	SOA	ns.dns.clusterset.local. hostmaster.clusterset.local. 1796217364 7200 1800 86400 5

;; ADDITIONAL SECTION:
db-0.west.db.demo.svc.clusterset.local.	5 IN A	10.1.0.11
fd00-2--23.east.prod.db.demo.svc.clusterset.local. 5 IN	AAAA fd00:2::23
`

func TestDigParse(t *testing.T) {
	r := &DigResult{Output: digOutput}
	if err := r.parse(); err != nil {
		t.Fatal(err)
	}
	if r.Rcode != "NOERROR" || !r.AA() || !slices.Equal(r.Flags, []string{"qr", "aa"}) {
		t.Errorf("rcode %s, flags %v", r.Rcode, r.Flags)
	}
	if got, want := Briefs(r.Answer), []string{
		"_pg._tcp.db.demo.svc.clusterset.local. srv 0 50 5432 db-0.west.db.demo.svc.clusterset.local.",
		"_pg._tcp.db.demo.svc.clusterset.local. srv 0 50 5432 fd00-2--23.east.prod.db.demo.svc.clusterset.local.",
	}; !slices.Equal(got, want) {
		t.Errorf("answer %q, want %q", got, want)
	}
	if len(r.Authority) != 1 || r.Authority[0].Header().Ttl != 5 {
		t.Errorf("authority %v", r.Authority)
	}
	if got, want := Briefs(r.Additional), []string{
		"db-0.west.db.demo.svc.clusterset.local. a 10.1.0.11",
		"fd00-2--23.east.prod.db.demo.svc.clusterset.local. aaaa fd00:2::23",
	}; !slices.Equal(got, want) {
		t.Errorf("additional %q, want %q", got, want)
	}
}

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

func TestClusterRoleFromFile(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	role, err := ClusterRoleFromFile(repo + "/deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if role.Name != PluginUser {
		t.Errorf("ClusterRole %s, want %s", role.Name, PluginUser)
	}
}

func TestDataRaces(t *testing.T) {
	out := "[INFO] up\n==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n==================\n[INFO] more\n"
	want := "==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n==================\n"
	if got := dataRaces(out); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := dataRaces("[INFO] fine\n"); got != "" {
		t.Errorf("got %q for no race", got)
	}
}

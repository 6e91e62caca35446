package multicluster

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want parsedName
	}{
		{"clusterset.local.", parsedName{kind: kindApex}},
		{"dns-version.clusterset.local.", parsedName{kind: kindDNSVersion}},
		{"ns.dns.clusterset.local.", parsedName{kind: kindNSHost}},
		{"dns.clusterset.local.", parsedName{kind: kindEmptyNonTerminal}},
		{"svc.clusterset.local.", parsedName{kind: kindEmptyNonTerminal}},
		{"demo.svc.clusterset.local.", parsedName{kind: kindNamespace, namespace: "demo"}},
		{"web.demo.svc.clusterset.local.", parsedName{kind: kindService, namespace: "demo", service: "web.demo"}},
		{"_http._tcp.web.demo.svc.clusterset.local.", parsedName{kind: kindSub, namespace: "demo", service: "web.demo", sub: "_http._tcp"}},
		{"pod-0.east.prod.db.demo.svc.clusterset.local.", parsedName{kind: kindSub, namespace: "demo", service: "db.demo", sub: "pod-0.east.prod"}},
		{"a.b.c.d.e.db.demo.svc.clusterset.local.", parsedName{kind: kindSub, namespace: "demo", service: "db.demo", sub: "a.b.c.d.e"}},
		// Nothing of ours lives here.
		{"other.local.", parsedName{}},
		{"xclusterset.local.", parsedName{}},
		{"web.demo.pod.clusterset.local.", parsedName{}},
		{"web.demo.svc.svc.clusterset.local.", parsedName{kind: kindSub, namespace: "svc", service: "demo.svc", sub: "web"}},
		{"foo.clusterset.local.", parsedName{}},
		{"ns.dns.dns.clusterset.local.", parsedName{}},
		{"-bad.demo.svc.clusterset.local.", parsedName{}},
		{"web.-bad.svc.clusterset.local.", parsedName{}},
		{"web.demo-.svc.clusterset.local.", parsedName{}},
		{"w_b.demo.svc.clusterset.local.", parsedName{}},
		{"*.demo.svc.clusterset.local.", parsedName{}},
		{"web.*.svc.clusterset.local.", parsedName{}},
		{`we\.b.demo.svc.clusterset.local.`, parsedName{}},
		{`a\000.web.demo.svc.clusterset.local.`, parsedName{}},
		{strings.Repeat("a", 64) + ".demo.svc.clusterset.local.", parsedName{}},
		{"..web.demo.svc.clusterset.local.", parsedName{}},
		{"a..web.demo.svc.clusterset.local.", parsedName{}},
		{".svc.clusterset.local.", parsedName{}},
		{"local.", parsedName{}},
		{".", parsedName{}},
		{"", parsedName{}},
	} {
		if got := parseName(tc.name, zone); got != tc.want {
			t.Errorf("parseName(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"web.demo.svc.clusterset.local.", "_a._tcp.w.d.svc.clusterset.local.", "a.b.c.w.d.svc.clusterset.local.", "clusterset.local.", `\..svc.clusterset.local.`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := parseName(name, zone)
		if p.kind == kindService || p.kind == kindSub {
			if tail := p.service + ".svc." + zone; name != tail && !strings.HasSuffix(name, "."+tail) {
				t.Fatalf("%q: service key %q is not the name's", name, p.service)
			}
			if !isLabel(p.namespace) {
				t.Fatalf("%q: namespace %q", name, p.namespace)
			}
		}
		if p.kind == kindSub && !strings.HasPrefix(name, p.sub+"."+p.service+".svc.") {
			t.Fatalf("%q: sub %q", name, p.sub)
		}
	})
}

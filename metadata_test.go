package multicluster

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

func TestMetadata(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	m.clusterSel, m.zonal = true, true
	for _, tc := range []struct{ qname, ns, svc, cluster, zone, selection string }{
		{"web.demo.svc.clusterset.local.", "demo", "web", "", "", ""},
		{"_http._tcp.web.demo.svc.clusterset.local.", "demo", "web", "", "", ""},
		{"DB-0.east.prod.db.demo.svc.clusterset.local.", "demo", "db", "east.prod", "", ""},
		{"east.prod.pin._cluster.db.demo.svc.clusterset.local.", "demo", "db", "east.prod", "", "pin"},
		{"eu-west-1a.prefer._zone.db.demo.svc.clusterset.local.", "demo", "db", "", "eu-west-1a", "prefer"},
		{"pin._cluster.db.demo.svc.clusterset.local.", "demo", "db", "", "", ""},
		{"dns-version.clusterset.local.", "", "", "", "", ""},
		{"example.org.", "", "", "", "", ""},
	} {
		r := new(dns.Msg)
		r.SetQuestion(tc.qname, dns.TypeA)
		ctx := metadata.ContextWithMetadata(context.Background())
		ctx = m.Metadata(ctx, request.Request{W: &test.ResponseWriter{}, Req: r})
		get := func(label string) string {
			if f := metadata.ValueFunc(ctx, "multicluster/"+label); f != nil {
				return f()
			}
			return ""
		}
		if get("namespace") != tc.ns || get("service") != tc.svc || get("cluster") != tc.cluster ||
			get("zone") != tc.zone || get("selection") != tc.selection {
			t.Errorf("%s: namespace=%q service=%q cluster=%q zone=%q selection=%q", tc.qname,
				get("namespace"), get("service"), get("cluster"), get("zone"), get("selection"))
		}
	}
}

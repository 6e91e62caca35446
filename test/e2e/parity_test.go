package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestParityWithStock asks stock CoreDNS v1.15.0 (its kubernetes plugin with
// `multicluster clusterset.local`) and ours the same questions about one
// fixture and fails on every answer that differs, unless the difference is
// one of parityAllowed: the differences the README documents.
//
// The fixture is written through v1beta1, as MCS controllers write it; the
// CRD of deploy/crds serves v1alpha1 with the same schema, which is what
// stock reads, so both servers read the very same objects.
//
// Compared: rcode, AA, and each section's records, sorted and lower-cased,
// with the SOA serial left out (it is time-based in both). TTLs are compared
// on every record: docs/kubernetes-plugin.md says both plugins give every record the
// configured TTL (`ttl`, "the same" in "Compared with the kubernetes
// plugin's multicluster option"), the SOA min(TTL, 300) with the TTL as its
// minimum ("Choices where the specification is silent"). Both run with a TTL
// that is not the default, so equal TTLs are not a coincidence of defaults.
// The one record whose TTL the README documents as different, stock's
// dns-version TXT (28800), is part of that record's allow-list entry.
//
// The stock binary is E2E_STOCK_COREDNS; hack/stock.sh builds it once and
// prints its path, and hack/test.sh passes it.
func TestParityWithStock(t *testing.T) {
	stock := parityStockBinary(t)
	t.Parallel()

	imports, headless := parityFixture()
	parityWriteFixture(t, imports, headless)

	// The fixture is in the API server before either starts, and both wait
	// for their ready plugin (synced): then they hold the same objects.
	const ttl = 17
	stockDNS, oursDNS := parityServers(t, stock, ttl, imports, headless)

	qs := parityQueries(imports, headless)
	allowed := parityAllowed(ttl, imports, headless)
	seen, same := parityCompare(t, stockDNS, oursDNS, qs, allowed)
	for i, d := range allowed {
		if seen[i] == 0 {
			t.Errorf("the documented difference %q (README: %s) did not occur: if stock and ours now agree there, remove it from parityAllowed and from the README", d.what, d.readme)
		}
		t.Logf("allowed difference %q (README: %s): %d questions", d.what, d.readme, seen[i])
	}
	documented := 0
	for _, n := range seen {
		documented += n
	}
	t.Logf("%d questions asked of stock and ours: %d answered the same, %d differently as documented, %d differently otherwise",
		len(qs), same, documented, len(qs)-same-documented)
}

// parityStockBinary is E2E_STOCK_COREDNS, which must be stock CoreDNS
// v1.15.0; without it the test ends (missing).
func parityStockBinary(t *testing.T) string {
	t.Helper()
	stock := os.Getenv("E2E_STOCK_COREDNS")
	if stock == "" {
		missing(t, "E2E_STOCK_COREDNS is not set: set it to stock CoreDNS v1.15.0, which hack/stock.sh builds once (hack/stock, about 5 CPU-minutes) and whose path it prints, e.g. E2E_STOCK_COREDNS=$(hack/stock.sh); hack/test.sh does this")
	}
	if _, err := os.Stat(stock); err != nil {
		t.Fatalf("E2E_STOCK_COREDNS: %v", err)
	}
	if out, err := parityRun(stock, "-version"); err != nil || !strings.Contains(out, "CoreDNS-1.15.0") {
		t.Fatalf("E2E_STOCK_COREDNS=%s -version: %q, %v; want CoreDNS-1.15.0", stock, out, err)
	}
	return stock
}

// parityWriteFixture writes the fixture's namespaces, imports, and
// headless imports with their slices.
func parityWriteFixture(t *testing.T, imports []parityImport, headless []parityHeadless) {
	t.Helper()
	for _, ns := range []string{"parity", "parity-more", "parity-headless"} {
		apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	}
	for _, im := range imports {
		parityWriteImport(t, im)
	}
	for _, hl := range headless {
		parityWriteImport(t, hl.parityImport)
		for _, s := range hl.slices {
			parityWriteSlice(t, hl.parityImport, s)
		}
	}
}

// parityServers runs stock CoreDNS and ours with ttl, and waits until both
// serve the fixture. Stock lists Services, Namespaces and EndpointSlices of
// the whole cluster: the admin. Ours: the plugin's least-privilege identity.
func parityServers(t *testing.T, stock string, ttl int, imports []parityImport, headless []parityHeadless) (stockDNS, oursDNS *harness.CoreDNS) {
	t.Helper()
	admin := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := env.WriteAdminKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	stockDNS = harness.RunCoreDNS(t, stock, harness.CoreDNSOptions{
		Plugins: fmt.Sprintf("kubernetes clusterset.local {\n\tkubeconfig %s\n\tttl %d\n\tmulticluster clusterset.local\n}\n", admin, ttl),
	})
	oursDNS = harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "ttl "+strconv.Itoa(ttl)),
	})
	servers := []struct {
		name string
		c    *harness.CoreDNS
	}{{"stock", stockDNS}, {"ours", oursDNS}}
	for _, s := range servers {
		harness.Eventually(t, syncWithin, func() error { return paritySynced(s.c, imports, headless) })
	}
	return stockDNS, oursDNS
}

// parityCompare asks stock and ours each of qs, and checks that they
// answer the same, or differently as one of allowed says. It returns how
// many questions each allowed difference explained, and how many were
// answered the same.
func parityCompare(t *testing.T, stockDNS, oursDNS *harness.CoreDNS, qs []parityQuery, allowed []parityDifference) (seen []int, same int) {
	t.Helper()
	seen = make([]int, len(allowed))
	for _, q := range qs {
		rs, errS := harness.Exchange(stockDNS.Addr(), q.name, q.qtype)
		ro, errO := harness.Exchange(oursDNS.Addr(), q.name, q.qtype)
		if errS != nil || errO != nil {
			t.Errorf("%s %s (%s): stock: %v; ours: %v", q.name, dns.TypeToString[q.qtype], q.kind, errS, errO)
			continue
		}
		ns, no := parityRender(rs), parityRender(ro)
		if ns == no {
			same++
			continue
		}
		i := slices.IndexFunc(allowed, func(d parityDifference) bool { return d.match(q) })
		if i < 0 {
			t.Errorf("%s %s (%s): stock and ours answer differently, and no documented difference allows it:\n--- stock\n%s\n--- ours\n%s",
				q.name, dns.TypeToString[q.qtype], q.kind, ns, no)
			continue
		}
		d := allowed[i]
		if !d.stock(rs) || !d.ours(ro) {
			t.Errorf("%s %s (%s): the answers differ, but not as the documented difference %q (README: %s) says (stock: %s; ours: %s):\n--- stock\n%s\n--- ours\n%s",
				q.name, dns.TypeToString[q.qtype], q.kind, d.what, d.readme, d.stockSays, d.oursSays, ns, no)
			continue
		}
		seen[i]++
	}
	return seen, same
}

func parityRun(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// parityDifference is a difference between stock's and ours' answers that
// the README documents: the questions it concerns, and what each answers.
type parityDifference struct {
	what, readme        string // the difference, and the README section documenting it
	match               func(q parityQuery) bool
	stock, ours         func(r *dns.Msg) bool
	stockSays, oursSays string
}

// parityAllowed are the documented differences; every other difference
// fails the test.
func parityAllowed(ttl uint32, imports []parityImport, headless []parityHeadless) []parityDifference {
	nxdomain := func(r *dns.Msg) bool { return r.Rcode == dns.RcodeNameError && len(r.Answer) == 0 }
	nodata := func(r *dns.Msg) bool { return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 0 }
	// The port numbers of unnamed ports, which have SRV records in stock
	// only.
	unnamed := map[uint16]bool{}
	for _, im := range append(imports, func() (out []parityImport) {
		for _, h := range headless {
			out = append(out, h.parityImport)
		}
		return out
	}()...) {
		for _, p := range im.ports {
			if p.name == "" {
				unnamed[uint16(p.port)] = true
			}
		}
	}
	srvs := func(r *dns.Msg) (map[string]*dns.SRV, bool) {
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return nil, false
		}
		out := map[string]*dns.SRV{}
		for _, rr := range r.Answer {
			x, ok := rr.(*dns.SRV)
			if !ok {
				return nil, false
			}
			out[fmt.Sprintf("%s %d", strings.ToLower(x.Target), x.Port)] = x
		}
		return out, true
	}
	addrs := func(r *dns.Msg) bool {
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return false
		}
		for _, rr := range r.Answer {
			if t := rr.Header().Rrtype; t != dns.TypeA && t != dns.TypeAAAA {
				return false
			}
		}
		return true
	}
	// SRV answers: ours holds one record per target and port, weighted
	// floor(100 / its number of records); stock the same targets and
	// ports, and those of unnamed ports, weighted by its records before it
	// dropped duplicates. The comparison sees both answers at once, so
	// stock's and ours' checks share this state through the closure.
	var stockSRV map[string]*dns.SRV
	srvStock := func(r *dns.Msg) bool {
		var ok bool
		stockSRV, ok = srvs(r)
		return ok
	}
	srvOurs := func(r *dns.Msg) bool {
		if stockSRV == nil {
			return false
		}
		if nodata(r) { // a service whose ports are all unnamed
			for _, x := range stockSRV {
				if !unnamed[x.Port] {
					return false
				}
			}
			return true
		}
		ours, ok := srvs(r)
		if !ok || len(ours) != len(r.Answer) {
			return false
		}
		weight := uint16(max(1, 100/len(ours)))
		for k, x := range ours {
			if x.Weight != weight || x.Priority != 0 || stockSRV[k] == nil {
				return false
			}
		}
		for k, x := range stockSRV {
			if ours[k] == nil && !unnamed[x.Port] {
				return false
			}
		}
		return true
	}
	txt := func(want string, ttl uint32) func(r *dns.Msg) bool {
		return func(r *dns.Msg) bool {
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				return false
			}
			x, ok := r.Answer[0].(*dns.TXT)
			return ok && x.Hdr.Ttl == ttl && slices.Equal(x.Txt, []string{want})
		}
	}
	return []parityDifference{
		{
			what:   "empty non-terminal _<proto>.<svc>.<ns>.svc of a named port",
			readme: `docs/kubernetes-plugin.md, "Choices where the specification is silent": Empty non-terminals answer NODATA, not NXDOMAIN (RFC 8020); and "Compared with the kubernetes plugin's multicluster option": NODATA for empty non-terminals`,
			match:  func(q parityQuery) bool { return q.kind == kindENTProto },
			stock:  nxdomain, stockSays: "NXDOMAIN",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "empty non-terminal <clusterid>.<svc>.<ns>.svc of a headless service",
			readme: `docs/kubernetes-plugin.md, "Choices where the specification is silent": Empty non-terminals answer NODATA, not NXDOMAIN (RFC 8020); and "Compared with the kubernetes plugin's multicluster option": NODATA for empty non-terminals`,
			match:  func(q parityQuery) bool { return q.kind == kindENTCluster },
			stock:  nxdomain, stockSays: "NXDOMAIN",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "apex NS",
			readme: `"Description", the records served: apex SOA, NS with ns.dns.<zone> as the name server (and "Choices where the specification is silent": ns.dns.<zone> answers A or AAAA with the address the query arrived on)`,
			match:  func(q parityQuery) bool { return q.name == apex && q.qtype == dns.TypeNS },
			stock:  nodata, stockSays: "NODATA",
			ours: func(r *dns.Msg) bool {
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					return false
				}
				x, ok := r.Answer[0].(*dns.NS)
				return ok && strings.EqualFold(x.Ns, "ns.dns."+apex) && x.Hdr.Ttl == ttl
			},
			oursSays: "NS ns.dns." + apex,
		},
		{
			what:   "empty non-terminal _<proto>.<svc>.<ns>.svc that an unnamed port shares with a named one",
			readme: `docs/kubernetes-plugin.md, "Choices where the specification is silent": Empty non-terminals answer NODATA, not NXDOMAIN (RFC 8020)`,
			match:  func(q parityQuery) bool { return strings.HasSuffix(q.kind, " unnamed port") },
			stock:  nxdomain, stockSays: "NXDOMAIN",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "SRV weights and unnamed ports",
			readme: `docs/kubernetes-plugin.md, "Compared with the kubernetes plugin's multicluster option": SRV weights, and unnamed ports; "Choices where the specification is silent": SRV`,
			match: func(q parityQuery) bool {
				return q.qtype == dns.TypeSRV && (q.kind == "ClusterSetIP" || q.kind == "Headless" || strings.HasSuffix(q.kind, ", upper case") || strings.HasSuffix(q.kind, " port"))
			},
			stock: srvStock, stockSays: "SRV records weighted by its records before duplicates were dropped, unnamed ports included",
			ours: srvOurs, oursSays: "one SRV record per target and port of a named port, weighted floor(100 / records)",
		},
		{
			what:   "A and AAAA at a port's SRV name",
			readme: `docs/kubernetes-plugin.md, "Compared with the kubernetes plugin's multicluster option": names hold only the records the specification gives them`,
			match: func(q parityQuery) bool {
				return (q.qtype == dns.TypeA || q.qtype == dns.TypeAAAA) && strings.HasSuffix(q.kind, " port")
			},
			stock: addrs, stockSays: "the service's addresses",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "SRV at a headless endpoint's name",
			readme: `docs/kubernetes-plugin.md, "Compared with the kubernetes plugin's multicluster option": names hold only the records the specification gives them`,
			match: func(q parityQuery) bool {
				return q.qtype == dns.TypeSRV && strings.HasPrefix(q.kind, "headless endpoint, ready")
			},
			stock: func(r *dns.Msg) bool { _, ok := srvs(r); return ok }, stockSays: "one SRV record per port, targeting the endpoint",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "a type that an existing name does not have: TXT at the apex, A at dns-version",
			readme: `"Description": a name that exists without records of the asked type is NODATA`,
			match: func(q parityQuery) bool {
				return (q.name == apex && q.qtype == dns.TypeTXT) || (q.name == "dns-version."+apex && q.qtype == dns.TypeA)
			},
			stock: nxdomain, stockSays: "NXDOMAIN",
			ours: nodata, oursSays: "NODATA",
		},
		{
			what:   "dns-version TXT",
			readme: `docs/kubernetes-plugin.md, "Compared with the kubernetes plugin's multicluster option": stock's "1.1.0" (TTL 28800), the cluster-local DNS schema's version, against ours' "1.0.0", the MCS DNS specification's; and "Description", the records served: dns-version TXT "1.0.0"`,
			match:  func(q parityQuery) bool { return q.name == "dns-version."+apex && q.qtype == dns.TypeTXT },
			stock:  txt("1.1.0", 28800), stockSays: `TXT "1.1.0", TTL 28800`,
			ours: txt("1.0.0", ttl), oursSays: fmt.Sprintf(`TXT "1.0.0", TTL %d`, ttl),
		},
	}
}

type parityPort struct {
	name, proto string
	port        int
}

type parityImport struct {
	ns, name, typ string
	ips, families []string
	ports         []parityPort
}

// fqdn is the service's name in the zone.
func (im parityImport) fqdn() string { return im.name + "." + im.ns + ".svc." + apex }

type parityEndpoint = mcsEndpoint

type paritySlice struct {
	cluster, addressType string
	endpoints            []parityEndpoint
}

type parityHeadless struct {
	parityImport
	slices []paritySlice
}

// parityFixture: ClusterSetIP imports of one and of both families, with one
// port, several (two sharing a number, TCP and UDP), and an unnamed one; 20
// more of one port in a second namespace; and headless imports: one with
// EndpointSlices of two clusters (IPv4 and IPv6), endpoints with hostnames
// and without, ready, unset and not ready, a named and an unnamed port; one
// whose only endpoint is not ready.
func parityFixture() ([]parityImport, []parityHeadless) {
	v4, dual, v6 := []string{"IPv4"}, []string{"IPv4", "IPv6"}, []string{"IPv6"}
	http := []parityPort{{"http", "TCP", 80}}
	imports := []parityImport{
		{ns: "parity", name: "web", typ: "ClusterSetIP", ips: []string{"10.46.0.1", "fd00:46::1"}, families: dual, ports: []parityPort{
			{"http", "TCP", 80}, {"https", "TCP", 443}, {"dns", "UDP", 53}, {"dns-tcp", "TCP", 53}, {"sctp", "SCTP", 9000},
		}},
		{ns: "parity", name: "api", typ: "ClusterSetIP", ips: []string{"10.46.0.2"}, families: v4, ports: http},
		{ns: "parity", name: "v6", typ: "ClusterSetIP", ips: []string{"fd00:46::3"}, families: v6, ports: []parityPort{{"grpc", "TCP", 50051}}},
		{ns: "parity", name: "unnamed", typ: "ClusterSetIP", ips: []string{"10.46.0.4"}, families: v4, ports: []parityPort{{"", "TCP", 7000}}},
		{ns: "parity", name: "mixed", typ: "ClusterSetIP", ips: []string{"10.46.0.5", "fd00:46::5"}, families: dual, ports: []parityPort{{"http", "TCP", 80}, {"", "UDP", 5000}}},
	}
	for i := range 20 {
		imports = append(imports, parityImport{ns: "parity-more", name: fmt.Sprintf("svc-%02d", i), typ: "ClusterSetIP",
			ips: []string{fmt.Sprintf("10.46.1.%d", i+1)}, families: v4, ports: http})
	}
	headless := []parityHeadless{
		{
			parityImport: parityImport{ns: "parity-headless", name: "db", typ: "Headless", families: dual,
				ports: []parityPort{{"pg", "TCP", 5432}, {"", "TCP", 9187}}},
			slices: []paritySlice{
				{"cluster-a", "IPv4", []parityEndpoint{
					{"10.47.1.1", "db-0", "true"}, {"10.47.1.2", "db-1", ""}, {"10.47.1.3", "db-2", "false"},
					{"10.47.1.4", "", "true"}, {"10.47.1.5", "", "false"},
				}},
				{"cluster-b", "IPv4", []parityEndpoint{
					{"10.47.2.1", "", "true"}, {"10.47.2.2", "", ""}, {"10.47.2.3", "db-0", "true"},
				}},
				{"cluster-b", "IPv6", []parityEndpoint{
					{"fd00:47:2::1", "", "true"}, {"fd00:47:2::2", "db-0", "true"}, {"fd00:47:2::3", "", "false"},
				}},
			},
		},
		{
			parityImport: parityImport{ns: "parity-headless", name: "idle", typ: "Headless", families: v4, ports: http},
			slices: []paritySlice{
				{"cluster-a", "IPv4", []parityEndpoint{{"10.47.3.1", "idle-0", "false"}}},
			},
		},
	}
	return imports, headless
}

// servicePorts are im's ports.
func (im parityImport) servicePorts() []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, p := range im.ports {
		out = append(out, corev1.ServicePort{Name: p.name, Protocol: corev1.Protocol(p.proto), Port: int32(p.port)})
	}
	return out
}

// parityWriteImport writes im through v1beta1 as an MCS controller does,
// from cluster-a and cluster-b.
func parityWriteImport(t *testing.T, im parityImport) {
	t.Helper()
	writeImport(t, harness.Import{Namespace: im.ns, Name: im.name, Type: im.typ, IPs: im.ips, IPFamilies: im.families,
		Ports: im.servicePorts(), Clusters: []string{"cluster-a", "cluster-b"}})
}

// parityWriteSlice writes one MCS EndpointSlice of im from s.cluster.
func parityWriteSlice(t *testing.T, im parityImport, s paritySlice) {
	t.Helper()
	applyMCSSlice(t, im.ns, im.name+"-"+s.cluster+"-"+strings.ToLower(s.addressType), im.name, s.cluster,
		"parity.multicluster.x-k8s.io", s.addressType, im.servicePorts(), s.endpoints)
}

// paritySynced checks that c answers every ClusterSetIP import's address, and
// the headless A with every ready IPv4 endpoint.
func paritySynced(c *harness.CoreDNS, imports []parityImport, headless []parityHeadless) error {
	for _, im := range imports {
		qtype := dns.TypeA
		if strings.Contains(im.ips[0], ":") {
			qtype = dns.TypeAAAA
		}
		r, err := harness.Exchange(c.Addr(), im.fqdn(), qtype)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("%s: %s %s not answered yet:\n%s", c.Bin, im.fqdn(), dns.TypeToString[qtype], parityRender(r))
		}
	}
	for _, hl := range headless {
		want := 0
		for _, s := range hl.slices {
			for _, ep := range s.endpoints {
				if s.addressType == "IPv4" && ep.ready != "false" {
					want++
				}
			}
		}
		if want == 0 {
			continue
		}
		r, err := harness.Exchange(c.Addr(), hl.fqdn(), dns.TypeA)
		if err != nil {
			return err
		}
		if len(r.Answer) != want {
			return fmt.Errorf("%s: %s A: %d records, want %d:\n%s", c.Bin, hl.fqdn(), len(r.Answer), want, parityRender(r))
		}
	}
	return nil
}

// Kinds of question that an allow-list entry names.
const (
	kindENTProto   = "empty non-terminal _<proto>.<svc>"
	kindENTCluster = "empty non-terminal <clusterid>.<svc>"
)

type parityQuery struct {
	kind  string
	name  string
	qtype uint16
}

// parityQueries are the questions: of every import its A, AAAA, SRV and
// more types, the per-port SRV names and the names around them; of every
// headless import also every endpoint's name (ready or not) and cluster
// name; the namespaces' names; the apex and the names under it.
func parityQueries(imports []parityImport, headless []parityHeadless) []parityQuery {
	var qs []parityQuery
	add := func(kind, name string, types ...uint16) {
		for _, t := range types {
			qs = append(qs, parityQuery{kind, name, t})
		}
	}
	service := func(im parityImport) {
		svc := im.fqdn()
		add(im.typ, svc, dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeMX, dns.TypeTXT, dns.TypePTR)
		add(im.typ+", upper case", strings.ToUpper(svc), dns.TypeA, dns.TypeSRV)
		add(im.typ+", reserved <x>.<svc>", "nosuch."+svc, dns.TypeA)
		protos := map[string]bool{}
		for _, p := range im.ports {
			proto := "_" + strings.ToLower(p.proto)
			if p.name == "" {
				// No per-port name; the protocol label alone is no
				// name either.
				add(im.typ+" unnamed port", proto+"."+svc, dns.TypeSRV)
				continue
			}
			name := "_" + p.name + "." + proto + "." + svc
			add(im.typ+" port", name, dns.TypeSRV, dns.TypeA, dns.TypeAAAA)
			add(im.typ+" port, upper case", strings.ToUpper(name), dns.TypeSRV)
			add(im.typ+" port, wrong protocol", "_"+p.name+"._nosuch."+svc, dns.TypeSRV)
			if !protos[proto] {
				protos[proto] = true
				add(kindENTProto, proto+"."+svc, dns.TypeA)
			}
		}
		add(im.typ+" unknown port", "_nosuch._tcp."+svc, dns.TypeSRV)
		add(im.typ+" unknown protocol", "_tcp._nosuch."+svc, dns.TypeSRV)
	}
	nss := []string{}
	for _, im := range imports {
		service(im)
		if !slices.Contains(nss, im.ns) {
			nss = append(nss, im.ns)
		}
	}
	for _, hl := range headless {
		service(hl.parityImport)
		svc := hl.fqdn()
		clusters := map[string]bool{}
		for _, s := range hl.slices {
			if !clusters[s.cluster] {
				clusters[s.cluster] = true
				add(kindENTCluster, s.cluster+"."+svc, dns.TypeA)
				add("headless cluster, reserved <x>", "nosuch."+s.cluster+"."+svc, dns.TypeA)
			}
			for _, ep := range s.endpoints {
				add("headless endpoint, ready "+ep.ready, ep.label()+"."+s.cluster+"."+svc, dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
			}
		}
		add("headless endpoint of an unknown cluster", hl.slices[0].endpoints[0].label()+".cluster-nosuch."+svc, dns.TypeA)
		if !slices.Contains(nss, hl.ns) {
			nss = append(nss, hl.ns)
		}
	}
	for _, ns := range nss {
		add("namespace", ns+".svc."+apex, dns.TypeA, dns.TypeSRV)
		add("missing service", "nosuch."+ns+".svc."+apex, dns.TypeA, dns.TypeSRV)
	}
	add("missing namespace", "parity-nosuch.svc."+apex, dns.TypeA)
	add("missing service, missing namespace", "nosuch.parity-nosuch.svc."+apex, dns.TypeA)
	add("apex", apex, dns.TypeSOA, dns.TypeNS, dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT)
	add("svc", "svc."+apex, dns.TypeA, dns.TypeSOA)
	add("dns-version", "dns-version."+apex, dns.TypeTXT, dns.TypeA)
	add("name under the apex", "nosuch."+apex, dns.TypeA)
	return qs
}

// parityRender is what is compared of a response: rcode, AA, and each
// section's records (TTLs included) sorted and lower-cased, the SOA serial
// and the OPT record left out.
func parityRender(r *dns.Msg) string {
	section := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			switch x := rr.(type) {
			case *dns.OPT:
				continue
			case *dns.SOA:
				c := *x
				c.Serial = 0
				rr = &c
			}
			out = append(out, strings.ToLower(strings.ReplaceAll(rr.String(), "\t", " ")))
		}
		slices.Sort(out)
		return strings.Join(out, "\n    ")
	}
	return fmt.Sprintf("rcode=%s aa=%v\n  answer:\n    %s\n  authority:\n    %s\n  additional:\n    %s",
		dns.RcodeToString[r.Rcode], r.Authoritative, section(r.Answer), section(r.Ns), section(r.Extra))
}

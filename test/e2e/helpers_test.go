package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const (
	apex       = "clusterset.local."
	defaultTTL = 5
	// syncWithin bounds how long a change in the API server may take to
	// show in answers.
	syncWithin = 30 * time.Second
)

// n turns "web.demo" into "web.demo.svc.clusterset.local.".
func n(short string) string { return short + ".svc." + apex }

// Expected records, in harness.Brief form.
func a(name, ip string) string    { return strings.ToLower(name) + " a " + ip }
func aaaa(name, ip string) string { return strings.ToLower(name) + " aaaa " + ip }
func srv(name string, weight, port int, target string) string {
	return fmt.Sprintf("%s srv 0 %d %d %s", strings.ToLower(name), weight, port, strings.ToLower(target))
}

// want is what an answer must be.
type want struct {
	rcode string // NOERROR when empty
	// answer is the answer section, exactly (order aside); empty means NODATA
	// when the rcode is NOERROR.
	answer []string
	// additional, when not nil, is the set of records of the additional section.
	additional []string
}

func nxdomain() want { return want{rcode: "NXDOMAIN"} }
func nodata() want   { return want{} }

// check compares r with w, and checks what holds for every answer: AA set,
// every record's TTL is ttl, and the apex SOA in the authority section of
// NXDOMAIN and NODATA answers.
func (w want) check(r *harness.DigResult, ttl uint32) error {
	var errs []string
	rcode := w.rcode
	if rcode == "" {
		rcode = "NOERROR"
	}
	if r.Rcode != rcode {
		errs = append(errs, fmt.Sprintf("rcode %s, want %s", r.Rcode, rcode))
	}
	if !r.AA() {
		errs = append(errs, fmt.Sprintf("AA not set (flags %v)", r.Flags))
	}
	wantAnswer := lower(w.answer)
	slices.Sort(wantAnswer)
	if got := harness.Briefs(r.Answer); !slices.Equal(got, wantAnswer) {
		errs = append(errs, fmt.Sprintf("answer section\n\tgot  %q\n\twant %q", got, wantAnswer))
	}
	if w.additional != nil {
		wantAdd := lower(w.additional)
		slices.Sort(wantAdd)
		wantAdd = slices.Compact(wantAdd)
		if got := slices.Compact(harness.Briefs(r.Additional)); !slices.Equal(got, wantAdd) {
			errs = append(errs, fmt.Sprintf("additional section\n\tgot  %q\n\twant %q", got, wantAdd))
		}
	}
	if rcode == "NXDOMAIN" || (rcode == "NOERROR" && len(w.answer) == 0) {
		if err := checkAuthoritySOA(r, ttl); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, rr := range r.Records() {
		if rr.Header().Ttl != ttl {
			errs = append(errs, fmt.Sprintf("TTL %d, want %d: %s", rr.Header().Ttl, ttl, rr))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// checkAuthoritySOA checks that the authority section holds the apex SOA.
func checkAuthoritySOA(r *harness.DigResult, ttl uint32) error {
	var soas []*dns.SOA
	for _, rr := range r.Authority {
		if s, ok := rr.(*dns.SOA); ok {
			soas = append(soas, s)
		}
	}
	if len(soas) != 1 {
		return fmt.Errorf("authority section has %d SOA records, want 1: %q", len(soas), harness.Briefs(r.Authority))
	}
	return checkSOA(soas[0], ttl)
}

// checkSOA checks the apex SOA:
// clusterset.local. SOA ns.dns.clusterset.local. hostmaster.clusterset.local. <serial> 7200 1800 86400 5
// The contract gives the minimum (negative-caching TTL) for the default ttl
// only, so it is checked only then.
func checkSOA(s *dns.SOA, ttl uint32) error {
	if !strings.EqualFold(s.Hdr.Name, apex) || !strings.EqualFold(s.Ns, "ns.dns."+apex) ||
		!strings.EqualFold(s.Mbox, "hostmaster."+apex) ||
		s.Refresh != 7200 || s.Retry != 1800 || s.Expire != 86400 ||
		(ttl == defaultTTL && s.Minttl != defaultTTL) {
		return fmt.Errorf("SOA %q, want %s SOA ns.dns.%s hostmaster.%s <serial> 7200 1800 86400 %d",
			s.String(), apex, apex, apex, defaultTTL)
	}
	return nil
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

// dig asks c, failing the test when dig itself fails.
func dig(t testing.TB, c *harness.CoreDNS, name, qtype string, extra ...string) *harness.DigResult {
	t.Helper()
	r, err := c.Dig(name, qtype, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// expect checks one answer now; the table test runs once the stack is synced.
func expect(t testing.TB, c *harness.CoreDNS, ttl uint32, name, qtype string, w want, extra ...string) {
	t.Helper()
	r := dig(t, c, name, qtype, extra...)
	if err := w.check(r, ttl); err != nil {
		t.Errorf("%s %s:\n%v\n%s", name, qtype, err, r)
	}
}

// eventually waits until c's answer to name/qtype is w; changes in the API
// server reach answers through watches, so tests of changes poll.
func eventually(t testing.TB, c *harness.CoreDNS, name, qtype string, w want) {
	t.Helper()
	harness.Eventually(t, syncWithin, func() error {
		r, err := c.Dig(name, qtype)
		if err != nil {
			return err
		}
		if err := w.check(r, defaultTTL); err != nil {
			return fmt.Errorf("%s %s:\n%v\n%s", name, qtype, err, r)
		}
		return nil
	})
}

// startPluginDNS runs CoreDNS with the multicluster plugin reading the API
// server as the plugin's least-privilege identity.
func startPluginDNS(t testing.TB, options ...string) *harness.CoreDNS {
	t.Helper()
	return harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, options...),
	})
}

// mcsEndpoint is one endpoint of an MCS EndpointSlice a test writes: ready
// is "true", "false" or "" (the condition unset, which counts as ready).
type mcsEndpoint struct {
	addr, hostname, ready string
}

// label is the endpoint's DNS label under its cluster: its hostname, else
// its address with dots or colons as dashes.
func (ep mcsEndpoint) label() string {
	if ep.hostname != "" {
		return ep.hostname
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(ep.addr)
}

// applyMCSSlice writes an MCS EndpointSlice: name in ns, for service, from
// cluster, managed by managedBy, with the YAML list of ports (each item
// starting "\n- ") and the endpoints eps.
func applyMCSSlice(t *testing.T, ns, name, service, cluster, managedBy, addressType, ports string, eps []mcsEndpoint) {
	t.Helper()
	var b strings.Builder
	for _, ep := range eps {
		fmt.Fprintf(&b, "- addresses: [%q]\n", ep.addr)
		if ep.hostname != "" {
			fmt.Fprintf(&b, "  hostname: %s\n", ep.hostname)
		}
		if ep.ready == "" {
			b.WriteString("  conditions: {}\n")
		} else {
			fmt.Fprintf(&b, "  conditions: {ready: %s}\n", ep.ready)
		}
	}
	apply(t, fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: %s
  labels:
    multicluster.kubernetes.io/service-name: %s
    multicluster.kubernetes.io/source-cluster: %s
    endpointslice.kubernetes.io/managed-by: %s
addressType: %s
ports:%s
endpoints:
%s`, name, ns, service, cluster, managedBy, addressType, ports, b.String()))
}

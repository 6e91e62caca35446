package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// The name server's addresses: those bind names as they are; for a wildcard
// socket the host's, loopback and link-local left out unless nothing else.
func TestBoundAddrs(t *testing.T) {
	iface := func(cidrs ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var out []net.Addr
			for _, c := range cidrs {
				ip, n, err := net.ParseCIDR(c)
				if err != nil {
					return nil, err
				}
				n.IP = ip
				out = append(out, n)
			}
			return out, nil
		}
	}
	for _, tc := range []struct {
		hosts []string
		iface func() ([]net.Addr, error)
		want  string
	}{
		{[]string{"127.0.0.1"}, iface("10.0.0.5/24"), "[127.0.0.1]"},
		{[]string{"10.0.0.5", "fd00::5"}, iface("10.0.0.6/24"), "[10.0.0.5 fd00::5]"},
		{nil, iface("127.0.0.1/8", "::1/128", "10.244.1.7/24", "fe80::1/64", "fd00:10::7/64"), "[10.244.1.7 fd00:10::7]"},
		{[]string{""}, iface("127.0.0.1/8", "fe80::1/64"), "[127.0.0.1]"},
		{[]string{"0.0.0.0"}, iface("192.0.2.1/24"), "[192.0.2.1]"},
		{nil, func() ([]net.Addr, error) { return nil, errors.New("no") }, "[]"},
		{[]string{"10.0.0.5", "10.0.0.5", "::ffff:10.0.0.5"}, nil, "[10.0.0.5]"},
	} {
		if got := fmt.Sprint(boundAddrs(tc.hosts, tc.iface)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.hosts, got, tc.want)
		}
	}
}

// A zone transfer carries the addresses of ns.dns.<zone>, which is inside
// the zone: ns_address's, or the server's own.
func TestTransferCarriesNameServerAddresses(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	m.boundAddrs = []net.IP{net.ParseIP("127.0.0.1").To4()}
	glue := "ns.dns.clusterset.local. 5 IN A 127.0.0.1"
	got := collect(t, m, zone, 0)
	if i := slices.Index(got, glue); i != 2 || got[1] != "clusterset.local. 5 IN NS ns.dns.clusterset.local." {
		t.Errorf("the NS and its address do not follow the SOA: %v", got[:3])
	}
	m.nsAddrs = []net.IP{net.ParseIP("192.0.2.53").To4(), net.ParseIP("2001:db8::53")}
	got = collect(t, m, zone, 0)
	for _, want := range []string{"ns.dns.clusterset.local. 5 IN A 192.0.2.53", "ns.dns.clusterset.local. 5 IN AAAA 2001:db8::53"} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	if slices.Contains(got, glue) {
		t.Error("ns_address and the server's own address both published")
	}
}

// wildcardWriter is a ResponseWriter whose socket is bound to no address.
type wildcardWriter struct{ test.ResponseWriter }

func (wildcardWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4zero, Port: 53} }

// Queries for ns.dns.<zone> and the apex NS: the query's own address, or on
// a wildcard socket the server's, or ns_address whatever the socket.
func TestNameServerAddressAnswers(t *testing.T) {
	ask := func(m *Multicluster, w dns.ResponseWriter, name string, qtype uint16) *dns.Msg {
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		rec := dnstest.NewRecorder(w)
		if _, err := m.ServeDNS(context.Background(), rec, req); err != nil {
			t.Fatal(err)
		}
		return rec.Msg
	}
	brief := func(rrs []dns.RR) string {
		var s []string
		for _, r := range rrs {
			s = append(s, strings.ReplaceAll(r.String(), "\t", " "))
		}
		return strings.Join(s, "; ")
	}
	m := newTestPlugin(t, fixture()...)
	m.boundAddrs = []net.IP{net.ParseIP("10.244.1.7").To4()}
	if got := brief(ask(m, &test.ResponseWriter{}, "ns.dns.clusterset.local.", dns.TypeA).Answer); got != "ns.dns.clusterset.local. 5 IN A 127.0.0.1" {
		t.Errorf("over a bound socket: %s", got)
	}
	if got := brief(ask(m, &wildcardWriter{}, "ns.dns.clusterset.local.", dns.TypeA).Answer); got != "ns.dns.clusterset.local. 5 IN A 10.244.1.7" {
		t.Errorf("over a wildcard socket: %s", got)
	}
	if got := brief(ask(m, &wildcardWriter{}, "clusterset.local.", dns.TypeNS).Extra); got != "ns.dns.clusterset.local. 5 IN A 10.244.1.7" {
		t.Errorf("apex NS glue over a wildcard socket: %s", got)
	}
	m.nsAddrs = []net.IP{net.ParseIP("192.0.2.53").To4()}
	if got := brief(ask(m, &test.ResponseWriter{}, "ns.dns.clusterset.local.", dns.TypeA).Answer); got != "ns.dns.clusterset.local. 5 IN A 192.0.2.53" {
		t.Errorf("with ns_address: %s", got)
	}
}

package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// checkServer asks s each mix's sample name with dig and checks the answer;
// it returns one line per dig for the report.
func checkServer(s *server, mixes []mix, fx fixture) ([]string, error) {
	var lines []string
	for _, m := range mixes {
		if s.Name == "floor" && !m.Floor {
			continue
		}
		r, err := harness.Dig(s.Port, m.Sample, m.SampleType)
		if err != nil {
			return lines, fmt.Errorf("%s: %w", s.Name, err)
		}
		if r.Rcode != "NOERROR" {
			return lines, fmt.Errorf("%s: %s %s: %s, want NOERROR\n%s", s.Name, m.Sample, m.SampleType, r.Rcode, r)
		}
		var want []string
		switch {
		case s.Name == "floor":
			// whoami answers every name: the client's address, in the
			// additional section.
		case m.Key == "a":
			want = []string{strings.ToLower(m.Sample) + " a " + importIP(0)}
		case m.Key == "srv":
			want = []string{fmt.Sprintf("%s srv 0 100 %d %s", strings.ToLower(m.Sample), portNumber, fx.name(0))}
		case m.Key == "headless":
			for c := range fx.clusters {
				for e := range fx.endpoints {
					want = append(want, headlessFQDN()+" a "+endpointIP(c, e))
				}
			}
			slices.Sort(want)
		}
		got := harness.Briefs(r.Answer)
		if want != nil && !slices.Equal(got, want) {
			return lines, fmt.Errorf("%s: %s %s: answer\n  %s\nwant\n  %s\n%s", s.Name, m.Sample, m.SampleType,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "), r)
		}
		summary := fmt.Sprintf("%d answer records", len(r.Answer))
		if len(got) == 1 {
			summary = got[0]
		}
		if s.Name == "floor" {
			summary = fmt.Sprintf("%d additional records (whoami)", len(r.Additional))
		}
		lines = append(lines, fmt.Sprintf("%-5s dig %s %s -> %s, aa=%v: %s", s.Name, m.Sample, m.SampleType, r.Rcode, r.AA(), summary))
	}
	return lines, nil
}

// query is one question of the comparison.
type query struct {
	kind  string // what is asked, for grouping differences
	name  string
	qtype uint16
}

// comparisonQueries are the questions on which ours and stock are compared:
// every import's A, AAAA, port SRV and service SRV, the headless names, and
// names around them.
func comparisonQueries(fx fixture, n int) []query {
	var qs []query
	for i := range n {
		qs = append(qs,
			query{"ClusterSetIP A", fx.name(i), dns.TypeA},
			query{"ClusterSetIP AAAA (IPv4-only)", fx.name(i), dns.TypeAAAA},
			query{"ClusterSetIP _http._tcp SRV", "_http._tcp." + fx.name(i), dns.TypeSRV},
			query{"ClusterSetIP service SRV", fx.name(i), dns.TypeSRV},
		)
	}
	hl := headlessFQDN()
	ep := strings.ReplaceAll(endpointIP(0, 0), ".", "-") + "." + clusterID(0) + "." + hl
	svc0 := fx.name(0)
	return append(qs,
		query{"headless A", hl, dns.TypeA},
		query{"headless AAAA", hl, dns.TypeAAAA},
		query{"headless _http._tcp SRV", "_http._tcp." + hl, dns.TypeSRV},
		query{"headless service SRV", hl, dns.TypeSRV},
		query{"headless endpoint A", ep, dns.TypeA},
		query{"headless cluster name A", clusterID(0) + "." + hl, dns.TypeA},
		query{"missing service A", "nosuch." + fx.namespace(0) + ".svc." + zone + ".", dns.TypeA},
		query{"missing namespace A", "nosuch.nosuch.svc." + zone + ".", dns.TypeA},
		query{"namespace A", fx.namespace(0) + ".svc." + zone + ".", dns.TypeA},
		query{"svc A", "svc." + zone + ".", dns.TypeA},
		query{"apex SOA", zone + ".", dns.TypeSOA},
		query{"apex NS", zone + ".", dns.TypeNS},
		query{"dns-version TXT", "dns-version." + zone + ".", dns.TypeTXT},
		query{"ClusterSetIP MX", svc0, dns.TypeMX},
		query{"ClusterSetIP A, upper case", strings.ToUpper(svc0), dns.TypeA},
		query{"unknown port SRV", "_https._tcp." + svc0, dns.TypeSRV},
		query{"wrong protocol SRV", "_http._udp." + svc0, dns.TypeSRV},
		query{"_tcp under service A", "_tcp." + svc0, dns.TypeA},
	)
}

// exchange asks addr q with EDNS0 (4096) over UDP, and over TCP when truncated.
func exchange(addr string, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	m.SetEdns0(4096, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, UDPSize: 4096}
	r, _, err := c.Exchange(m, addr)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, addr)
	}
	return r, err
}

// normalize renders a response for comparison: rcode, AA, and each section's
// records sorted, lower-cased, with the SOA serial (time-based) left out.
func normalize(r *dns.Msg) string {
	return render(r, 0)
}

// render is normalize's text, with at most limit records a section when
// limit > 0, for messages.
func render(r *dns.Msg, limit int) string {
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
		if limit > 0 && len(out) > limit {
			out = append(out[:limit], fmt.Sprintf("(%d more)", len(out)-limit))
		}
		return strings.Join(out, "\n    ")
	}
	return fmt.Sprintf("rcode=%s aa=%v\n  answer:\n    %s\n  authority:\n    %s\n  additional:\n    %s",
		dns.RcodeToString[r.Rcode], r.Authoritative, section(r.Answer), section(r.Ns), section(r.Extra))
}

// difference is a kind of question on which ours and stock answer differently.
type difference struct {
	Kind          string
	Count, Of     int
	Example       string
	Stock, Ours   string
	StockErr, Err string
}

// compare asks ours and stock every comparison question and groups the
// questions whose normalized answers differ by kind.
func compare(ctx context.Context, stock, ours *server, qs []query) ([]difference, error) {
	byKind := map[string]*difference{}
	var order []string
	total := map[string]int{}
	for _, q := range qs {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		total[q.kind]++
		rs, errS := exchange(stock.addr(), q.name, q.qtype)
		ro, errO := exchange(ours.addr(), q.name, q.qtype)
		if errS == nil && errO == nil && normalize(rs) == normalize(ro) {
			continue
		}
		d, ok := byKind[q.kind]
		if !ok {
			d = &difference{Kind: q.kind, Example: q.name + " " + dns.TypeToString[q.qtype]}
			if errS == nil {
				d.Stock = render(rs, 3)
			}
			if errO == nil {
				d.Ours = render(ro, 3)
			}
			if errS != nil {
				d.StockErr = errS.Error()
			}
			if errO != nil {
				d.Err = errO.Error()
			}
			byKind[q.kind] = d
			order = append(order, q.kind)
		}
		d.Count++
	}
	var out []difference
	for _, k := range order {
		d := byKind[k]
		d.Of = total[k]
		out = append(out, *d)
	}
	return out, nil
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Package contract is the DNS contract of KEP-1645 as one table of questions
// about the objects of testdata/, with the one check of an answer against
// it. The plugin's unit tests ask it of the handler, the e2e tests of the
// real CoreDNS with dig, and the bench of the server it measures.
//
// Files: contract.go (the expected records, Case and its Check of an answer:
// rcode, AA, sections, TTLs, the apex SOA), cases.go (the table, Cases,
// about testdata/'s namespaces demo and shop) and objects.go (the reader of
// testdata/: YAML split and decoded, Namespaces and CRDs first).
package contract

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

const (
	// Apex is the zone the table asks about.
	Apex = "clusterset.local."
	// TTL is the plugin's default TTL, which every record of the table has.
	TTL = 5
)

// N turns "web.demo" into "web.demo.svc.clusterset.local.".
func N(short string) string { return short + ".svc." + Apex }

// Expected records, in Brief form.
func A(name, ip string) string    { return strings.ToLower(name) + " a " + ip }
func AAAA(name, ip string) string { return strings.ToLower(name) + " aaaa " + ip }
func SRV(name string, weight, port int, target string) string {
	return fmt.Sprintf("%s srv 0 %d %d %s", strings.ToLower(name), weight, port, strings.ToLower(target))
}

// Want is what an answer must be.
type Want struct {
	Rcode string // NOERROR when empty
	// Answer is the answer section, exactly (order aside); empty means NODATA
	// when the rcode is NOERROR.
	Answer []string
	// Additional, when not nil, is the set of records of the additional section.
	Additional []string
}

func NXDOMAIN() Want { return Want{Rcode: "NXDOMAIN"} }
func NODATA() Want   { return Want{} }

// Case is one question and its answer.
type Case struct {
	Name, Type string
	Want
}

// Check compares m with w, and checks what holds for every answer: AA set,
// every record's TTL is ttl, and the apex SOA in the authority section of
// NXDOMAIN and NODATA answers.
func (w Want) Check(m *dns.Msg, ttl uint32) error {
	rcode, errs := w.answerErrs(m)
	if !m.Authoritative {
		errs = append(errs, "AA not set")
	}
	if w.Additional != nil {
		wantAdd := slices.Compact(sortedLower(w.Additional))
		if got := slices.Compact(Briefs(additional(m))); !slices.Equal(got, wantAdd) {
			errs = append(errs, fmt.Sprintf("additional section\n\tgot  %q\n\twant %q", got, wantAdd))
		}
	}
	if rcode == "NXDOMAIN" || (rcode == "NOERROR" && len(w.Answer) == 0) {
		if err := CheckAuthoritySOA(m.Ns, ttl); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, rr := range slices.Concat(m.Answer, m.Ns, additional(m)) {
		if rr.Header().Ttl != ttl {
			errs = append(errs, fmt.Sprintf("TTL %d, want %d: %s", rr.Header().Ttl, ttl, rr))
		}
	}
	return joined(errs)
}

// CheckAnswer compares m's rcode and answer section with w, and nothing
// else: what holds of an answer that came through a cache or a forwarder,
// which lowers TTLs, may clear AA, and answers a name asked in another case
// with the owner names of the answer it holds (compared in lower case).
func (w Want) CheckAnswer(m *dns.Msg) error {
	_, errs := w.answerErrs(m)
	return joined(errs)
}

// answerErrs compares m's rcode and answer section with w, and returns the
// rcode w wants.
func (w Want) answerErrs(m *dns.Msg) (rcode string, errs []string) {
	rcode = w.Rcode
	if rcode == "" {
		rcode = "NOERROR"
	}
	if got := dns.RcodeToString[m.Rcode]; got != rcode {
		errs = append(errs, fmt.Sprintf("rcode %s, want %s", got, rcode))
	}
	wantAnswer := sortedLower(w.Answer)
	if got := Briefs(m.Answer); !slices.Equal(got, wantAnswer) {
		errs = append(errs, fmt.Sprintf("answer section\n\tgot  %q\n\twant %q", got, wantAnswer))
	}
	return rcode, errs
}

func joined(errs []string) error {
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// additional is m's additional section without the OPT pseudo-record.
func additional(m *dns.Msg) []dns.RR {
	return slices.DeleteFunc(slices.Clone(m.Extra), func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeOPT })
}

// CheckAuthoritySOA checks that the authority section holds the apex SOA.
func CheckAuthoritySOA(authority []dns.RR, ttl uint32) error {
	var soas []*dns.SOA
	for _, rr := range authority {
		if s, ok := rr.(*dns.SOA); ok {
			soas = append(soas, s)
		}
	}
	if len(soas) != 1 {
		return fmt.Errorf("authority section has %d SOA records, want 1: %q", len(soas), Briefs(authority))
	}
	return CheckSOA(soas[0], ttl)
}

// CheckSOA checks the apex SOA:
// clusterset.local. SOA ns.dns.clusterset.local. hostmaster.clusterset.local. <serial> 7200 1800 86400 5
// The contract gives the minimum (negative-caching TTL) for the default TTL
// only, so it is checked only then. The serial changes with the data, so it
// is not checked.
func CheckSOA(s *dns.SOA, ttl uint32) error {
	if !strings.EqualFold(s.Hdr.Name, Apex) || !strings.EqualFold(s.Ns, "ns.dns."+Apex) ||
		!strings.EqualFold(s.Mbox, "hostmaster."+Apex) ||
		s.Refresh != 7200 || s.Retry != 1800 || s.Expire != 86400 ||
		(ttl == TTL && s.Minttl != TTL) {
		return fmt.Errorf("SOA %q, want %s SOA ns.dns.%s hostmaster.%s <serial> 7200 1800 86400 %d",
			s.String(), Apex, Apex, Apex, TTL)
	}
	return nil
}

// Brief renders rr without TTL and class, lower-cased, for comparisons:
// "web.demo.svc.clusterset.local. a 10.42.0.10".
func Brief(rr dns.RR) string {
	h := rr.Header()
	rdata := strings.TrimPrefix(rr.String(), h.String())
	return strings.ToLower(dns.Fqdn(h.Name) + " " + dns.TypeToString[h.Rrtype] + " " + strings.TrimSpace(rdata))
}

// Briefs renders every RR with Brief, sorted.
func Briefs(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, Brief(rr))
	}
	slices.Sort(out)
	return out
}

func sortedLower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	slices.Sort(out)
	return out
}

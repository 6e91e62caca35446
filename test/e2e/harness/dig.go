package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
)

// DigResult is dig's answer, parsed.
type DigResult struct {
	// Command and Output are what ran and what it printed.
	Command string
	Output  string

	Rcode string   // NOERROR, NXDOMAIN, SERVFAIL, ...
	Flags []string // header flags: qr, aa, tc, rd, ra, ...

	Answer, Authority, Additional []dns.RR
}

// AA says whether the authoritative-answer flag is set.
func (r *DigResult) AA() bool { return slices.Contains(r.Flags, "aa") }

// String is the command and its output, for failure messages.
func (r *DigResult) String() string { return "$ " + r.Command + "\n" + r.Output }

var (
	digStatus = regexp.MustCompile(`->>HEADER<<-.*\bstatus: ([A-Z]+)`)
	digFlags  = regexp.MustCompile(`^;; flags:([^;]*);`)
)

// Dig runs the real dig against 127.0.0.1:port without recursion, one try of
// two seconds, and parses its output. extra dig options such as "+tcp" come
// before the name.
func Dig(port int, name, qtype string, extra ...string) (*DigResult, error) {
	return (&CoreDNS{Host: "127.0.0.1", Port: port}).Dig(name, qtype, extra...)
}

// CheckAnswer asks this CoreDNS name/qtype with dig and checks the answer
// against w, its records at the plugin's default TTL (contract.TTL).
func (c *CoreDNS) CheckAnswer(name, qtype string, w contract.Want) error {
	r, err := c.Dig(name, qtype)
	if err != nil {
		return err
	}
	if err := w.Check(r.Msg(), contract.TTL); err != nil {
		return fmt.Errorf("%s %s:\n%v\n%s", name, qtype, err, r)
	}
	return nil
}

// WaitAnswer waits, at most within, until CheckAnswer passes: changes in
// the API server reach answers through watches.
func (c *CoreDNS) WaitAnswer(t testing.TB, within time.Duration, name, qtype string, w contract.Want) {
	t.Helper()
	Eventually(t, within, func() error { return c.CheckAnswer(name, qtype, w) })
}

// Dig asks this CoreDNS with dig, as Dig does.
func (c *CoreDNS) Dig(name, qtype string, extra ...string) (*DigResult, error) {
	args := []string{"@" + c.Host, "-p", strconv.Itoa(c.Port), "+norec", "+time=2", "+tries=1",
		"+noall", "+comments", "+answer", "+authority", "+additional"}
	args = append(append(args, extra...), name, qtype)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dig", args...)
	out, err := cmd.CombinedOutput()
	if errors.Is(err, exec.ErrNotFound) {
		return nil, errors.New("dig is not installed (apt-get install bind9-dnsutils)")
	}
	return ParseDig("dig "+strings.Join(args, " "), string(out), err)
}

// ParseDig parses the output of a dig command that ran (err: how it ended)
// with +comments and the sections it shows, wherever it ran.
func ParseDig(command, output string, err error) (*DigResult, error) {
	r := &DigResult{Command: command, Output: output}
	if err == nil {
		err = r.parse()
	}
	if err != nil {
		return r, fmt.Errorf("%s: %v\n%s", command, err, output)
	}
	return r, nil
}

func (r *DigResult) parse() error {
	sections := map[string]*[]dns.RR{";; ANSWER SECTION:": &r.Answer, ";; AUTHORITY SECTION:": &r.Authority, ";; ADDITIONAL SECTION:": &r.Additional}
	var section *[]dns.RR
	for line := range strings.Lines(r.Output) {
		switch line = strings.TrimSpace(line); {
		case digStatus.MatchString(line):
			r.Rcode = digStatus.FindStringSubmatch(line)[1]
		case digFlags.MatchString(line):
			r.Flags = strings.Fields(digFlags.FindStringSubmatch(line)[1])
		case strings.HasPrefix(line, ";") && strings.HasSuffix(line, "SECTION:"):
			section = sections[line] // nil for the QUESTION SECTION and OPT PSEUDOSECTION
		case line == "" || strings.HasPrefix(line, ";"):
		case section == nil:
			return fmt.Errorf("record outside a section: %q", line)
		default:
			rr, err := dns.NewRR(line)
			if err != nil {
				return fmt.Errorf("parsing %q: %v", line, err)
			}
			*section = append(*section, rr)
		}
	}
	if r.Rcode == "" {
		return errors.New("no status in dig's output")
	}
	return nil
}

// Msg is the answer as a DNS message, for contract.Want.Check.
func (r *DigResult) Msg() *dns.Msg {
	m := &dns.Msg{Answer: r.Answer, Ns: r.Authority, Extra: r.Additional}
	m.Rcode, m.Authoritative = -1, r.AA() // -1: no rcode a Want names
	if rcode, ok := dns.StringToRcode[r.Rcode]; ok {
		m.Rcode = rcode
	}
	return m
}

// Exchange asks addr one question without recursion, with EDNS0 (4096
// bytes) over UDP, and again over TCP when the answer is truncated: the
// library's view of an answer, where Dig is dig's.
func Exchange(addr, name string, qtype uint16) (*dns.Msg, error) {
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

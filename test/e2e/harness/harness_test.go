package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/clustersetdns/multicluster/internal/contract"
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
	if got, want := contract.Briefs(r.Answer), []string{
		"_pg._tcp.db.demo.svc.clusterset.local. srv 0 50 5432 db-0.west.db.demo.svc.clusterset.local.",
		"_pg._tcp.db.demo.svc.clusterset.local. srv 0 50 5432 fd00-2--23.east.prod.db.demo.svc.clusterset.local.",
	}; !slices.Equal(got, want) {
		t.Errorf("answer %q, want %q", got, want)
	}
	if len(r.Authority) != 1 || r.Authority[0].Header().Ttl != 5 {
		t.Errorf("authority %v", r.Authority)
	}
	if got, want := contract.Briefs(r.Additional), []string{
		"db-0.west.db.demo.svc.clusterset.local. a 10.1.0.11",
		"fd00-2--23.east.prod.db.demo.svc.clusterset.local. aaaa fd00:2::23",
	}; !slices.Equal(got, want) {
		t.Errorf("additional %q, want %q", got, want)
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

func TestMetricsValue(t *testing.T) {
	const text = `# TYPE a gauge
a 3
# TYPE b counter
b{version="v1"} 1
b{version="v2",kind="x"} 2
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics(families)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
		err    error
	}{
		{"a", nil, 3, nil},
		{"b", []string{"version", "v1"}, 1, nil},
		{"b", []string{"kind", "x", "version", "v2"}, 2, nil},
		{"b", []string{"version", "v2"}, 0, ErrNoSeries},
		{"b", nil, 0, ErrNoSeries},
		{"c", nil, 0, ErrNoSeries},
	} {
		got, err := m.Value(c.name, c.labels...)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("Value(%s, %v) = %v, %v; want %v, %v", c.name, c.labels, got, err, c.want, c.err)
		}
	}
}

func TestServiceImportCRDVersions(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, set string
		keep     []string
		want     []string // served versions, the storage version first
		fails    bool
	}{
		{dir: "deploy/crds", set: "v1alpha1", want: []string{"v1alpha1", "v1beta1", "v1alpha2"}},
		{dir: "deploy/crds", keep: []string{"v1alpha2"}, want: []string{"v1alpha2"}},
		{dir: "deploy/crds", keep: []string{"v1beta1", "v1alpha1"}, want: []string{"v1beta1", "v1alpha1"}},
		{dir: "deploy/crds-v1alpha2-storage", set: "v1beta1", want: []string{"v1beta1", "v1alpha1", "v1alpha2"}},
		{dir: "deploy/crds", set: "v9", fails: true},
		{dir: "deploy/crds", keep: []string{"v1alpha2", "v9"}, fails: true},
	} {
		crd, err := ServiceImportCRD(repo, c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.keep != nil {
			err = KeepVersions(crd, c.keep...)
		} else {
			err = SetStorage(crd, c.set)
		}
		if (err != nil) != c.fails {
			t.Errorf("%s %s%v: error %v", c.dir, c.set, c.keep, err)
			continue
		}
		if c.fails {
			continue
		}
		if storage, served := StorageVersion(crd), ServedVersions(crd); storage != c.want[0] || !slices.Equal(served, sorted(c.want)) {
			t.Errorf("%s %s%v: storage %s, served %v; want %v", c.dir, c.set, c.keep, storage, served, c.want)
		}
		if v := CRDVersion(crd, c.want[0]); v == nil || !v.Storage || CRDVersion(crd, "v9") != nil {
			t.Errorf("%s %s%v: CRDVersion(%s) = %v, want the storage version", c.dir, c.set, c.keep, c.want[0], v)
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func TestProcReadings(t *testing.T) {
	m, err := ProcMemory(os.Getpid())
	if err != nil || m.RSS <= 0 || m.Anon <= 0 || m.HWM < m.RSS {
		t.Errorf("ProcMemory(self) = %+v, %v", m, err)
	}
	if c, err := ReadCPUTime(""); err != nil || c.Total <= 0 || c.Busy > c.Total {
		t.Errorf("ReadCPUTime() = %+v, %v", c, err)
	}
	if len(os.Args) > 1 {
		pid, argv, err := findProcess(filepath.Base(os.Args[0]), os.Args[1])
		if err != nil || pid <= 0 || !slices.Equal(argv, os.Args) {
			t.Errorf("findProcess(self) = %d, %v, %v; want %d, %v", pid, argv, err, os.Getpid(), os.Args)
		}
	}
}

func TestCorefile(t *testing.T) {
	c := &CoreDNS{Host: "127.0.0.1", Port: 5300}
	got, err := c.corefile(CoreDNSOptions{NoLog: true, Metrics: true, Pprof: true, Plugins: "whoami\n"})
	if err != nil {
		t.Fatal(err)
	}
	var pprof, prom string
	if _, err := fmt.Sscanf(c.PprofURL, "http://%s", &pprof); err != nil || !strings.HasSuffix(pprof, "/debug/pprof") {
		t.Fatalf("PprofURL %q", c.PprofURL)
	}
	if _, err := fmt.Sscanf(c.MetricsURL, "http://%s", &prom); err != nil || !strings.HasSuffix(prom, "/metrics") {
		t.Fatalf("MetricsURL %q", c.MetricsURL)
	}
	want := "clusterset.local:5300 {\n\tbind 127.0.0.1\n\terrors\n\tpprof " + strings.TrimSuffix(pprof, "/debug/pprof") +
		"\n\tprometheus " + strings.TrimSuffix(prom, "/metrics") + "\n\twhoami\n}\n"
	if got != want || c.ReadyURL != "" {
		t.Errorf("corefile:\n%s\nwant:\n%s(ReadyURL %q)", got, want, c.ReadyURL)
	}
}

// An in-process DNS server that answers a.example. with 10.0.0.1 for its
// first five questions and 10.0.0.2 after: the watcher sees the write that
// sets 10.0.0.2, and gives up the one that sets 10.0.0.3.
func TestAnswerWatcher(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		ip := "10.0.0.1"
		if r.Question[0].Name == "a.example." && asked.Add(1) > 5 {
			ip = "10.0.0.2"
		}
		rr, _ := dns.NewRR(r.Question[0].Name + " 5 IN A " + ip)
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()
	w := &AnswerWatcher{Addr: pc.LocalAddr().String(), Sockets: 2, GiveUp: 300 * time.Millisecond}
	now := time.Now()
	w.Add(0, Write{Name: "a.example.", IP: "10.0.0.2", Sent: now})
	w.Add(1, Write{Name: "b.example.", IP: "10.0.0.3", Sent: now})
	w.Add(2, Write{Name: "c.example.", IP: "10.0.0.4", Sent: now})
	w.Drop(2)
	w.Close()
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := w.Seen()
	if _, ok := seen[0]; !ok || len(seen) != 1 || asked.Load() < 6 {
		t.Errorf("seen %v after %d questions for a.example.; want write 0 alone, after at least 6", seen, asked.Load())
	}
}

// The prober against an in-process DNS server: a right answer (one address,
// or a set in any order) counts as a lookup, an NXDOMAIN or other addresses
// as a failed one, and a forgotten name as nothing.
func TestProber(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string][]string{
		"a.example.": {"10.0.0.1"},
		"b.example.": {"10.0.0.2", "10.0.0.1"},
		"d.example.": {"10.0.0.9"},
		"e.example.": {"10.0.0.5"},
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		ips, ok := answers[r.Question[0].Name]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, ip := range ips {
			rr, _ := dns.NewRR(r.Question[0].Name + " 5 IN A " + ip)
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()
	p := NewProber(pc.LocalAddr().String())
	p.Expect("a.example.", "10.0.0.1")
	p.Expect("b.example.", "10.0.0.1", "10.0.0.2")
	p.Expect("c.example.", "10.0.0.3")                                    // NXDOMAIN
	p.ExpectAny("d.example.", []string{"10.0.0.1"}, []string{"10.0.0.8"}) // other addresses
	p.Expect("e.example.", "10.0.0.6")
	p.Forget("e.example.")
	stop := p.Start(context.Background())
	if err := Poll(10*time.Second, func() error {
		if total, _ := p.Counts(); total < 40 {
			return fmt.Errorf("%d lookups", total)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stop()
	total, failed := p.Counts()
	// Each round asks a, b, c and d in turn: c and d fail.
	if failed == 0 || total-failed == 0 || total-2*failed > 2 || 2*failed-total > 2 {
		t.Errorf("%d lookups, %d failed; want half of them failed (c and d)", total, failed)
	}
	if len(p.samples) == 0 {
		t.Error("no sample of a failed lookup")
	}
	for _, s := range p.samples {
		if !strings.Contains(s, "c.example.") && !strings.Contains(s, "d.example.") {
			t.Errorf("sample %q: want only c.example. and d.example. to fail", s)
		}
	}
	if got := p.Settled(); len(got) != 3 || !slices.Equal(got["b.example."], []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("Settled() = %v, want a, b and c with one set each", got)
	}
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// needTool returns the path of a program of the DNS software the test runs
// against, or ends the test without it (missing): hack/test.sh
// installs them (bind9, bind9-utils, knot-dnssecutils).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s is not installed (apt-get install %s)", name, pkg)
	}
	return path
}

// runTool runs a command and returns what it printed, failing the test when it fails.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// bindSecondary is a named serving zone on 127.0.0.1:port as a secondary
// of the primary at 127.0.0.1:primary, with integrity checks on.
type bindSecondary struct {
	port int
	dir  string
	cmd  *exec.Cmd
	out  *strings.Builder
}

func startBINDSecondary(t *testing.T, zone string, port, primary int) *bindSecondary {
	t.Helper()
	named := needTool(t, "named", "bind9")
	b := &bindSecondary{port: port, dir: t.TempDir(), out: &strings.Builder{}}
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	minimal-responses yes;
	check-integrity yes;
	check-names secondary fail;
	check-sibling yes;
};
controls { };
zone "%[3]s" {
	type secondary;
	primaries port %[4]d { 127.0.0.1; };
	file "%[1]s/%[3]s.db";
	masterfile-format text;
};
`, b.dir, port, strings.TrimSuffix(zone, "."), primary)
	if err := os.WriteFile(filepath.Join(b.dir, "named.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, needTool(t, "named-checkconf", "bind9-utils"), filepath.Join(b.dir, "named.conf"))
	b.cmd = exec.Command(named, "-g", "-c", filepath.Join(b.dir, "named.conf"))
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
		if t.Failed() {
			t.Logf("named:\n%s", harness.Abridge(b.out.String(), 10, 40))
		}
	})
	return b
}

// parseRRs reads the records dig printed, one a line.
func parseRRs(t *testing.T, out string) []dns.RR {
	t.Helper()
	var rrs []dns.RR
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("dig printed %q: %v", line, err)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

// serial is the serial of zone's SOA as port answers it, 0 when it does not.
func soaSerial(port int, zone string) uint32 {
	r, err := harness.Dig(port, zone, "SOA")
	if err != nil || r.Rcode != "NOERROR" || len(r.Answer) != 1 {
		return 0
	}
	if soa, ok := r.Answer[0].(*dns.SOA); ok {
		return soa.Serial
	}
	return 0
}

// TestZoneTransferToSecondaries: the zone a transfer gives loads where its
// integrity is checked (named-checkzone, Knot's kzonecheck, a BIND
// secondary with check-integrity), BIND answers the contract's names as
// the plugin does, and a change reaches BIND through NOTIFY, with no rndc.
// IXFR falls back to the whole zone except from the current serial.
func TestZoneTransferToSecondaries(t *testing.T) {
	t.Parallel()
	const ns = "xfr"
	r := migStartWith(t, "secondary", ns, harness.Options{})
	ours, bindPort := startTransferringDNS(t, r)
	r.DNS = ours
	eventually(t, ours, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	checkTransferredZone(t, r, ours)

	// A BIND secondary loads it and answers as the plugin does.
	b := startBINDSecondary(t, apex, bindPort, ours.Port)
	serial := soaSerial(ours.Port, apex)
	harness.Eventually(t, 30*time.Second, func() error {
		if got := soaSerial(b.port, apex); got != serial {
			return fmt.Errorf("BIND serves serial %d, the plugin %d", got, serial)
		}
		return nil
	})
	if !strings.Contains(b.out.String(), "Transfer status: success") {
		t.Errorf("named did not log a successful transfer")
	}
	compareWithSecondary(t, r, b, ours, serial)

	// A new ServiceImport reaches BIND through NOTIFY.
	late := checkNotifiedSecondary(t, r, b, ours, ns, serial)

	// IXFR: from the current serial the SOA alone; from an older one the whole zone.
	now := soaSerial(ours.Port, apex)
	cur := runTool(t, "dig", "@127.0.0.1", "-p", strconv.Itoa(ours.Port), "+nocmd", "+nostats", "+nocomments", fmt.Sprintf("IXFR=%d", now), apex)
	if got := len(parseRRs(t, cur)); got != 1 {
		t.Errorf("IXFR from the current serial gave %d records, want the SOA:\n%s", got, cur)
	}
	old := runTool(t, "dig", "@127.0.0.1", "-p", strconv.Itoa(ours.Port), "+nocmd", "+nostats", "+nocomments", fmt.Sprintf("IXFR=%d", serial), apex)
	if !strings.Contains(old, late) || !strings.Contains(old, n("web.demo")) {
		t.Errorf("IXFR from an older serial is not the whole zone:\n%s", harness.Abridge(old, 5, 5))
	}
	r.CheckLog()
}

// startTransferringDNS applies testdata and runs the plugin, as r's plugin
// identity, allowing zone transfers to 127.0.0.1 on bindPort, a free port.
func startTransferringDNS(t *testing.T, r *migRig) (ours *harness.CoreDNS, bindPort int) {
	t.Helper()
	objs, err := contract.ReadObjects(filepath.Join(r.Env.Repo, "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Env.ApplyAll(r.Ctx, objs); err != nil {
		t.Fatal(err)
	}
	bindPort, err = harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Env.PluginIdentity(r.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	ours = harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: fmt.Sprintf("transfer %s {\n\tto * 127.0.0.1:%d\n}\n", apex, bindPort) + harness.MulticlusterBlock(id.Kubeconfig),
	})
	return ours, bindPort
}

// checkTransferredZone checks the transferred zone, as a file, through both
// zone checkers, and that it holds the name server's address.
func checkTransferredZone(t *testing.T, r *migRig, ours *harness.CoreDNS) {
	t.Helper()
	axfr := runTool(t, "dig", "@127.0.0.1", "-p", strconv.Itoa(ours.Port), "+onesoa", "+nocmd", "+nostats", "+nocomments", "AXFR", apex)
	file := filepath.Join(t.TempDir(), "clusterset.local.zone")
	if err := os.WriteFile(file, []byte(axfr), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(axfr, "ns.dns."+apex) || !slices.ContainsFunc(strings.Split(axfr, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "ns.dns."+apex) && strings.Contains(l, "\tA\t127.0.0.1")
	}) {
		t.Errorf("the transfer lacks the name server's address:\n%s", harness.Abridge(axfr, 5, 5))
	}
	checkzone := runTool(t, needTool(t, "named-checkzone", "bind9-utils"), "-i", "full", "-k", "fail", "-n", "fail", "-m", "fail", "-M", "fail", "-S", "fail", apex, file)
	r.Logf("named-checkzone -i full: %s", strings.Join(strings.Fields(checkzone), " "))
	kz := runTool(t, needTool(t, "kzonecheck", "knot-dnssecutils"), "-v", "-o", apex, file)
	r.Logf("kzonecheck: %s", strings.Join(strings.Fields(kz), " "))
}

// compareWithSecondary checks that BIND, the secondary b at serial,
// answers the contract's questions as ours does.
func compareWithSecondary(t *testing.T, r *migRig, b *bindSecondary, ours *harness.CoreDNS, serial uint32) {
	t.Helper()
	compared := 0
	for _, tc := range contract.Cases {
		if tc.Type == "ANY" { // BIND answers ANY with the records; the plugin, as CoreDNS's kubernetes plugin, NODATA
			continue
		}
		theirs, err := harness.Dig(b.port, tc.Name, tc.Type)
		if err != nil {
			t.Fatal(err)
		}
		mine, err := ours.Dig(tc.Name, tc.Type)
		if err != nil {
			t.Fatal(err)
		}
		if theirs.Rcode != mine.Rcode || !slices.Equal(contract.Briefs(theirs.Answer), contract.Briefs(mine.Answer)) {
			t.Errorf("%s %s: BIND answers %s %v, the plugin %s %v", tc.Name, tc.Type,
				theirs.Rcode, contract.Briefs(theirs.Answer), mine.Rcode, contract.Briefs(mine.Answer))
		}
		compared++
	}
	r.Logf("BIND as secondary: serial %d, %d contract questions answered as the plugin answers them", serial, compared)
}

// checkNotifiedSecondary writes a new ServiceImport in ns and checks that
// it reaches the secondary b through NOTIFY within 2s of the write. It
// returns the new service's name.
func checkNotifiedSecondary(t *testing.T, r *migRig, b *bindSecondary, ours *harness.CoreDNS, ns string, serial uint32) string {
	t.Helper()
	start := time.Now()
	r.Create(migImport("v1beta1", ns, "late", "ClusterSetIP", "10.77.0.1"))
	late := n("late." + ns)
	eventually(t, ours, late, "A", want{Answer: []string{a(late, "10.77.0.1")}})
	r.Logf("the plugin answers %s %.0f ms after the write, serial %d -> %d", late, time.Since(start).Seconds()*1000, serial, soaSerial(ours.Port, apex))
	harness.Eventually(t, 10*time.Second, func() error {
		res, err := harness.Dig(b.port, late, "A")
		if err != nil {
			return err
		}
		return want{Answer: []string{a(late, "10.77.0.1")}}.Check(res.Msg(), defaultTTL)
	})
	took := time.Since(start)
	r.Logf("a new ServiceImport answered by the BIND secondary %.0f ms after the write (NOTIFY, no rndc)", took.Seconds()*1000)
	if took > 2*time.Second {
		t.Errorf("the secondary followed the change after %v, want within 2s", took)
	}
	if !strings.Contains(b.out.String(), "notify from 127.0.0.1") {
		t.Errorf("named logged no NOTIFY")
	}

	return late
}

// serialAtLeast reports whether serial a is b or after it, in RFC 1982
// serial number arithmetic.
func serialAtLeast(a, b uint32) bool { return a == b || int32(a-b) > 0 }

// clockPast waits until the clock, in seconds, is past serial: a change then
// sets the serial to the clock rather than one more (docs/operations.md, "The
// serial"). It fails the test when serial is over 5 s ahead of the clock.
func clockPast(t *testing.T, serial uint32) {
	t.Helper()
	past := time.Unix(int64(serial)+1, 0)
	if d := time.Until(past); d > 5*time.Second {
		t.Fatalf("serial %d is %v ahead of the clock", serial, d-time.Second)
	}
	for time.Now().Before(past) {
		time.Sleep(time.Until(past))
	}
}

// TestSerialAcrossRestartsAndReplicas: the zone's serial moves forward with
// every change and across a restart, and two replicas over the same objects
// differ, each counting from its own start and clock (docs/operations.md,
// "The serial": its Unix time at start, then at each change the later of
// one more and the current Unix time). A replica started after the other's
// last change is ahead of it; a change both see, once the clock is past both
// serials, sets each to the second of its own clock in which it applies the
// change. The two usually read the same second then, but nothing makes them:
// the test logs whether they agree and asserts each against its own clock.
func TestSerialAcrossRestartsAndReplicas(t *testing.T) {
	t.Parallel()
	const ns = "serial"
	r := migStartWith(t, "serial", ns, harness.Options{})
	r.Create(migImport("v1beta1", ns, "web", "ClusterSetIP", "10.78.0.1"))
	id, err := r.Env.PluginIdentity(r.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := func() *harness.CoreDNS {
		c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(id.Kubeconfig)})
		eventually(t, c, n("web."+ns), "A", want{Answer: []string{a(n("web."+ns), "10.78.0.1")}})
		return c
	}
	unix := func() uint32 { return uint32(time.Now().Unix()) }
	first := start()
	s0 := soaSerial(first.Port, apex)
	r.Create(migImport("v1beta1", ns, "api", "ClusterSetIP", "10.78.0.2"))
	eventually(t, first, n("api."+ns), "A", want{Answer: []string{a(n("api."+ns), "10.78.0.2")}})
	s1 := soaSerial(first.Port, apex)
	if !serialAtLeast(s1, s0+1) {
		t.Errorf("a change moved the serial from %d to %d", s0, s1)
	}
	// A second replica over the same objects, started once the clock is
	// past the first's serial: it counts from its own start, so it is ahead.
	clockPast(t, s1)
	started := unix()
	second := start()
	s2 := soaSerial(second.Port, apex)
	r.Logf("replica 1 at %d after one change; replica 2, started at %d, at %d", s1, started, s2)
	if !serialAtLeast(s2, started) || s2 == s1 {
		t.Errorf("replica 2, started at %d, is at serial %d, replica 1 at %d: want replica 2 at its start or after, not at replica 1's", started, s2, s1)
	}
	// A change both see, once the clock is past both serials: each takes
	// the second of its own clock in which it applies the change, between
	// the write and its answer.
	clockPast(t, max(s1, s2))
	before := unix()
	r.Create(migImport("v1beta1", ns, "db", "ClusterSetIP", "10.78.0.3"))
	var after [2]uint32
	for i, c := range []*harness.CoreDNS{first, second} {
		eventually(t, c, n("db."+ns), "A", want{Answer: []string{a(n("db."+ns), "10.78.0.3")}})
		after[i] = unix()
	}
	s1b, s2b := soaSerial(first.Port, apex), soaSerial(second.Port, apex)
	r.Logf("after a change both see, written at %d: replica 1 at %d, replica 2 at %d (agree: %v)", before, s1b, s2b, s1b == s2b)
	for i, s := range []uint32{s1b, s2b} {
		if s < before || s > after[i] {
			t.Errorf("replica %d is at serial %d after a change written at %d and answered by %d: want the clock then", i+1, s, before, after[i])
		}
	}
	s1 = s1b
	// A restart: the serial does not go back.
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	again := start()
	if s := soaSerial(again.Port, apex); !serialAtLeast(s, s1) {
		t.Errorf("after a restart the serial went from %d back to %d", s1, s)
	} else {
		r.Logf("after a restart: %d (was %d)", s, s1)
	}
}

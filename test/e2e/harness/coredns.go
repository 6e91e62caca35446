package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BuildCoreDNS builds the project's CoreDNS (./cmd/coredns of repo) into
// <repo>/.cache/coredns-e2e and returns its path, saying what it does to
// progress. When E2E_COREDNS names a binary (hack/test.sh builds it
// before the tests, outside their timeout), that one is used instead.
func BuildCoreDNS(repo string, progress io.Writer) (string, error) {
	if bin := os.Getenv("E2E_COREDNS"); bin != "" {
		fmt.Fprintf(progress, "e2e: using CoreDNS %s (E2E_COREDNS)\n", bin)
		_, err := os.Stat(bin)
		return bin, err
	}
	out := filepath.Join(repo, ".cache", "coredns-e2e")
	start := time.Now()
	fmt.Fprintf(progress, "e2e: building CoreDNS: go build -o %s ./cmd/coredns (in %s)\n", out, repo)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/coredns")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/coredns: %v\n%s", err, out)
	}
	fmt.Fprintf(progress, "e2e: built CoreDNS in %.0fs\n", time.Since(start).Seconds())
	return out, nil
}

// CoreDNSOptions say how to run CoreDNS.
type CoreDNSOptions struct {
	// Zones of the one server block; ["clusterset.local"] when empty.
	Zones []string
	// Port for DNS over UDP and TCP; a free one when 0.
	Port int
	// Host is the address CoreDNS binds (DNS and ready) and is reached at;
	// 127.0.0.1 when empty.
	Host string
	// Netns, when set, is the network namespace (/var/run/netns/NAME)
	// CoreDNS runs in; Host is then an address of it we reach (Netns.IP).
	Netns string
	// Plugins ends the server block, after bind, errors, log, ready (if
	// the binary has it), pprof and prometheus: e.g. `multicluster { ... }`.
	Plugins string
	// Metrics adds the prometheus plugin, on a free port (CoreDNS.MetricsURL);
	// Pprof the pprof plugin (CoreDNS.PprofURL).
	Metrics, Pprof bool
	// NoLog leaves out the log plugin, which writes a line a query: for
	// measurements.
	NoLog bool
	// Corefile, when set, makes the Corefile of the DNS port, bound to
	// 127.0.0.1; only answers are waited for, not a ready plugin.
	Corefile func(port int) string
	// Output, when not nil, also receives CoreDNS's stdout and stderr.
	Output io.Writer
	// Wrap runs CoreDNS through a command that execs it, e.g. taskset -c 0,
	// so that the process is still CoreDNS's own.
	Wrap []string
	// Env is added to this process's environment for CoreDNS.
	Env []string
	// ReadyWithin bounds the wait for answers and ready; 90 seconds when 0.
	ReadyWithin time.Duration
}

// CoreDNS is a running CoreDNS process.
type CoreDNS struct {
	Bin      string
	Host     string
	Port     int
	Corefile string
	// ReadyURL is the ready plugin's endpoint, empty without it;
	// MetricsURL the prometheus plugin's and PprofURL the pprof plugin's
	// (.../debug/pprof), empty without them.
	ReadyURL, MetricsURL, PprofURL string
	// Started is when the process was started, and ReadyIn how long it
	// then took to answer and be ready.
	Started time.Time
	ReadyIn time.Duration

	proc *process
	out  *buffer
	dir  string
}

// StartCoreDNS starts bin with a Corefile built from opts and waits until it
// answers DNS on UDP and TCP and until its ready plugin, when it has one,
// says it is ready. Stop it.
func StartCoreDNS(bin string, opts CoreDNSOptions) (c *CoreDNS, err error) {
	for range 3 { // a free port may be taken meanwhile by another process
		port := opts.Port
		if port == 0 {
			if port, err = FreePort(); err != nil {
				return nil, err
			}
		}
		c, err = startCoreDNS(bin, port, opts)
		if err == nil || opts.Port != 0 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return c, err
}

func startCoreDNS(bin string, port int, opts CoreDNSOptions) (*CoreDNS, error) {
	dir, err := os.MkdirTemp("", "e2e-coredns-")
	if err != nil {
		return nil, err
	}
	host := cmp.Or(opts.Host, "127.0.0.1")
	c := &CoreDNS{Bin: bin, Host: host, Port: port, out: &buffer{}, dir: dir}
	if opts.Corefile != nil {
		c.Corefile = opts.Corefile(port)
	} else if c.Corefile, err = c.corefile(opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(c.Corefile), 0o644); err != nil {
		return nil, err
	}
	argv := append(slices.Clone(opts.Wrap), bin, "-conf", conf)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), opts.Env...)
	var w io.Writer = c.out
	if opts.Output != nil {
		w = io.MultiWriter(c.out, opts.Output)
	}
	cmd.Stdout, cmd.Stderr = w, w
	c.Started = time.Now()
	if c.proc, err = startProcess(cmd, opts.Netns); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.wait(cmp.Or(opts.ReadyWithin, 90*time.Second)); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%v\n--- Corefile\n%s--- CoreDNS output\n%s", err, c.Corefile, c.Output())
	}
	c.ReadyIn = time.Since(c.Started)
	return c, nil
}

// corefile is the Corefile of opts, on c's host and port, and sets the
// URLs of the plugins it adds.
func (c *CoreDNS) corefile(opts CoreDNSOptions) (string, error) {
	zones := opts.Zones
	if len(zones) == 0 {
		zones = []string{"clusterset.local"}
	}
	keys := make([]string, len(zones))
	for i, z := range zones {
		keys[i] = strings.TrimSuffix(z, ".") + ":" + strconv.Itoa(c.Port)
	}
	ready, err := hasPlugin(c.Bin, "ready")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s {\n\tbind %s\n\terrors\n", strings.Join(keys, " "), c.Host)
	if !opts.NoLog {
		b.WriteString("\tlog\n")
	}
	for _, p := range []struct {
		plugin, path string
		on           bool
		url          *string
	}{
		{"ready", "/ready", ready, &c.ReadyURL},
		{"pprof", "/debug/pprof", opts.Pprof, &c.PprofURL},
		{"prometheus", "/metrics", opts.Metrics, &c.MetricsURL},
	} {
		if !p.on {
			continue
		}
		port, err := FreePort()
		if err != nil {
			return "", err
		}
		addr := net.JoinHostPort(c.Host, strconv.Itoa(port))
		*p.url = "http://" + addr + p.path
		fmt.Fprintf(&b, "\t%s %s\n", p.plugin, addr)
	}
	for line := range strings.Lines(strings.TrimSpace(opts.Plugins)) {
		fmt.Fprintf(&b, "\t%s", line)
	}
	b.WriteString("\n}\n")
	return b.String(), nil
}

// MulticlusterBlock is a `multicluster` plugin block for the Corefile.
func MulticlusterBlock(kubeconfig string, options ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "multicluster {\n\tkubeconfig %s\n", kubeconfig)
	for _, o := range options {
		fmt.Fprintf(&b, "\t%s\n", o)
	}
	b.WriteString("}\n")
	return b.String()
}

// hasPlugin says whether `bin -plugins` lists the DNS plugin name ("dns."
// name before CoreDNS 1.12); no binary has none.
func hasPlugin(bin, name string) (bool, error) {
	if bin == "" {
		return false, nil
	}
	list, err := exec.Command(bin, "-plugins").Output()
	if err != nil {
		return false, fmt.Errorf("%s -plugins: %w", bin, err)
	}
	return slices.ContainsFunc(strings.Fields(string(list)), func(f string) bool { return f == name || f == "dns."+name }), nil
}

// wait polls every 10 ms, so that ReadyIn can be read as a measurement,
// until a query for the first zone's SOA gets any response over UDP and over
// TCP, then until the ready plugin, if any, says 200.
func (c *CoreDNS) wait(within time.Duration) error {
	zone := "clusterset.local."
	for _, f := range strings.Fields(c.Corefile) {
		if h, _, ok := strings.Cut(f, ":"); ok && strings.Contains(h, ".") {
			zone = dns.Fqdn(h)
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	protos := []string{"udp", "tcp"} // until both answered once
	return poll(ctx, 10*time.Millisecond, func() error {
		select {
		case <-c.proc.done:
			return Permanent(fmt.Errorf("CoreDNS exited: %v", c.proc.err))
		default:
		}
		for _, proto := range protos {
			m := new(dns.Msg)
			m.SetQuestion(zone, dns.TypeSOA)
			cl := &dns.Client{Net: proto, Timeout: time.Second}
			if _, _, err := cl.Exchange(m, c.Addr()); err != nil {
				return fmt.Errorf("CoreDNS does not answer over %s on %s: %w", proto, c.Addr(), err)
			}
		}
		protos = nil
		if c.ReadyURL == "" {
			return nil
		}
		resp, err := (&http.Client{Timeout: time.Second}).Get(c.ReadyURL)
		if err != nil {
			return fmt.Errorf("CoreDNS is not ready: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CoreDNS is not ready: %s: %s", resp.Status, bytes.TrimSpace(body))
		}
		return nil
	})
}

// PID is CoreDNS's process ID.
func (c *CoreDNS) PID() int { return c.proc.cmd.Process.Pid }

// Addr is CoreDNS's DNS address.
func (c *CoreDNS) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// Output is what CoreDNS printed so far.
func (c *CoreDNS) Output() string { return c.out.String() }

// Stop terminates CoreDNS: SIGTERM, then SIGKILL after 10 seconds.
func (c *CoreDNS) Stop() error {
	if c == nil || c.proc == nil {
		return nil
	}
	defer os.RemoveAll(c.dir)
	return c.proc.stop(10 * time.Second)
}

// RunCoreDNS starts CoreDNS for a test and stops it when the test ends; when
// the test failed, it logs the Corefile and CoreDNS's output first. A data
// race reported by a CoreDNS built with -race fails the test.
func RunCoreDNS(t testing.TB, bin string, opts CoreDNSOptions) *CoreDNS {
	t.Helper()
	c, err := TryRunCoreDNS(t, bin, opts)
	if err != nil {
		t.Fatalf("starting CoreDNS: %v", err)
	}
	return c
}

// TryRunCoreDNS is RunCoreDNS returning the error of a failed start.
func TryRunCoreDNS(t testing.TB, bin string, opts CoreDNSOptions) (*CoreDNS, error) {
	t.Helper()
	c, err := StartCoreDNS(bin, opts)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if races := dataRaces(c.Output()); races != "" {
			t.Errorf("CoreDNS reported data races:\n%s", races)
		}
		if t.Failed() {
			t.Logf("--- Corefile\n%s--- CoreDNS output\n%s", c.Corefile, Abridge(c.Output(), 60, 120))
		}
	})
	return c, nil
}

// dataRaces extracts the race detector's reports, each between two lines of
// "=", from out.
func dataRaces(out string) string {
	const sep = "==================\n"
	var b strings.Builder
	for _, part := range strings.Split(out, sep) {
		if strings.HasPrefix(part, "WARNING: DATA RACE") {
			b.WriteString(sep + part + sep)
		}
	}
	return b.String()
}

// Abridge keeps the first head and last tail lines of s; the query log of a
// long poll would bury the rest.
func Abridge(s string, head, tail int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) <= head+tail+1 {
		return s
	}
	return strings.Join(lines[:head], "") +
		fmt.Sprintf("[... %d lines left out ...]\n", len(lines)-head-tail) +
		strings.Join(lines[len(lines)-tail:], "")
}

// ConfPath is the Corefile CoreDNS was started with; tests of the reload
// plugin rewrite it.
func (c *CoreDNS) ConfPath() string { return filepath.Join(c.dir, "Corefile") }

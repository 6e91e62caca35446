package main

import (
	"bytes"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// TestEditCorefile edits every testdata/*.Corefile (testdata/README.md says
// where each comes from) for clusterset.local and compares the result with
// NAME.golden byte for byte, or the refusal with NAME.err. A second run over
// the result must change nothing.
func TestEditCorefile(t *testing.T) {
	files, err := filepath.Glob("testdata/*.Corefile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".Corefile")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".Corefile") + ".golden"
			errFile := strings.TrimSuffix(f, ".Corefile") + ".err"
			e, err := editCorefile(string(in), "clusterset.local")
			if strings.HasPrefix(name, "refuse-") {
				if err == nil {
					t.Fatalf("want a refusal, got\n%s", e.out)
				}
				if !isRefusal(err) {
					t.Fatalf("want a refusal, got the error %v", err)
				}
				compare(t, errFile, []byte(err.Error()+"\n"))
				return
			}
			if err != nil {
				t.Fatalf("edit: %v", err)
			}
			compare(t, golden, []byte(e.out))
			if e.changed != (e.out != string(in)) {
				t.Errorf("changed = %v, but the output differs from the input: %v", e.changed, e.out != string(in))
			}
			again, err := editCorefile(e.out, "clusterset.local")
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			if again.changed || again.out != e.out {
				t.Errorf("second run changed the Corefile:\n%s", again.out)
			}
		})
	}
}

func compare(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it, then review it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("differs from %s:\n%s", file, lineDiff(string(want), string(got)))
	}
}

// TestEditCorefileChanges checks what the edit reports besides the text, and
// the text against what the edit is to do (editCorefile's doc comment,
// docs/installing.md): "multicluster ZONE", the zone lower-case without its
// trailing dot, on a line of its own just before the kubernetes directive of
// the block that receives the zone, indented as that directive; the
// kubernetes plugin's own multicluster option and the zone among the
// directive's zones removed; every other byte as it was. Each row says that
// as the one span of the input that changes (from, to); from "" is no change.
func TestEditCorefileChanges(t *testing.T) {
	for _, c := range []struct {
		file, zone         string
		changed, converted bool
		reload             bool
		line               int
		notes              int
		block              string
		from, to           string
	}{
		{file: "kubeadm", zone: "clusterset.local", changed: true, reload: true, line: 7, block: ".:53",
			from: "    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n",
			to:   "    ready\n    multicluster clusterset.local\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"},
		{file: "kubeadm", zone: "CLUSTERSET.local.", changed: true, reload: true, line: 7, block: ".:53",
			from: "    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n",
			to:   "    ready\n    multicluster clusterset.local\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"},
		{file: "cilium-kubeadm", zone: "clusterset.local", changed: true, converted: true, reload: true, line: 7, notes: 1, block: ".:53",
			from: "    ready\n    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n       multicluster clusterset.local\n       pods insecure\n",
			to:   "    ready\n    multicluster clusterset.local\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n"},
		// No block on port 53: the DNS Service sends 53 to this one.
		{file: "other-port", zone: "clusterset.local", changed: true, reload: true, line: 2, block: ".:5353",
			from: ".:5353 {\n    kubernetes",
			to:   ".:5353 {\n    multicluster clusterset.local\n    kubernetes"},
		// Port 53 wins over another port.
		{file: "prefer-53", zone: "clusterset.local", changed: true, reload: true, line: 7, block: ".:53",
			from: "    forward . /etc/resolv.conf\n}\n\n.:53 {\n    kubernetes",
			to:   "    forward . /etc/resolv.conf\n}\n\n.:53 {\n    multicluster clusterset.local\n    kubernetes"},
		// Imports from a folder other than custom/ are no platform's: noted, edited.
		{file: "import-other-dir", zone: "clusterset.local", changed: true, reload: true, line: 2, notes: 2, block: ".:53",
			from: ".:53 {\n    kubernetes",
			to:   ".:53 {\n    multicluster clusterset.local\n    kubernetes"},
		// The plugin is there already, placed by hand: nothing to do.
		{file: "mcs-api-external", zone: "clusterset.local", reload: true, line: 6, block: ".:53"},
		// Tabs, and a comment on the kubernetes line, which stays.
		{file: "local-parent", zone: "clusterset.local", changed: true, reload: true, line: 5, block: "local:53",
			from: "\terrors\n\tkubernetes cluster.local   # the cluster's own zone\n",
			to:   "\terrors\n\tmulticluster clusterset.local\n\tkubernetes cluster.local   # the cluster's own zone\n"},
		{file: "kubeadm", zone: "mcs.example", changed: true, reload: true, line: 7, block: ".:53",
			from: "    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n",
			to:   "    ready\n    multicluster mcs.example\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"},
	} {
		b, err := os.ReadFile("testdata/" + c.file + ".Corefile")
		if err != nil {
			t.Fatal(err)
		}
		in := string(b)
		e, err := editCorefile(in, c.zone)
		if err != nil {
			t.Errorf("%s %s: %v", c.file, c.zone, err)
			continue
		}
		if e.changed != c.changed || e.converted != c.converted || e.reload != c.reload || e.line != c.line || len(e.notes) != c.notes || e.block != c.block {
			t.Errorf("%s %s: changed %v converted %v reload %v line %d notes %q block %q; want %v %v %v %d %d notes %q",
				c.file, c.zone, e.changed, e.converted, e.reload, e.line, e.notes, e.block, c.changed, c.converted, c.reload, c.line, c.notes, c.block)
		}
		want := in
		if c.from != "" {
			if n := strings.Count(in, c.from); n != 1 {
				t.Fatalf("%s: the row's span is %d times in the input, want once: %q", c.file, n, c.from)
			}
			want = strings.Replace(in, c.from, c.to, 1)
		}
		if e.out != want {
			t.Errorf("%s %s: the edited Corefile differs from the one expected (-want +got):\n%s", c.file, c.zone, lineDiff(want, e.out))
		}
	}
}

// TestEditCorefileCRLF: a Corefile with CRLF line ends keeps them, and the
// new line gets one too.
func TestEditCorefileCRLF(t *testing.T) {
	in, err := os.ReadFile("testdata/kubeadm.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/kubeadm.golden")
	if err != nil {
		t.Fatal(err)
	}
	crlf := func(b []byte) string { return strings.ReplaceAll(string(b), "\n", "\r\n") }
	e, err := editCorefile(crlf(in), "clusterset.local")
	if err != nil {
		t.Fatal(err)
	}
	if e.out != crlf(want) {
		t.Errorf("got %q\nwant %q", e.out, crlf(want))
	}
}

func TestEditCorefileInvalidZone(t *testing.T) {
	for _, z := range []string{"", ".", "a b", "clusterset.local:53", "x/8"} {
		if _, err := editCorefile(".:53 {\n kubernetes cluster.local\n}\n", z); err == nil {
			t.Errorf("zone %q: no error", z)
		}
	}
}

// TestEditCorefileGarbage feeds the edit mangled Corefiles: it must never
// panic, and what it accepts it must accept again unchanged.
func TestEditCorefileGarbage(t *testing.T) {
	seeds := seedCorefiles(t)
	r := rand.New(rand.NewSource(1))
	alphabet := []string{"{", "}", "\n", " ", "\"", "\"\"", "#", "\\", "kubernetes", "multicluster", "import", "clusterset.local", ".:53", "{$HOME}", ":", "\r", "\x00", "\xff"}
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		b := []byte(seeds[r.Intn(len(seeds))])
		for k := r.Intn(6) + 1; k > 0; k-- {
			p := r.Intn(len(b) + 1)
			switch r.Intn(3) {
			case 0: // insert
				b = append(b[:p], append([]byte(alphabet[r.Intn(len(alphabet))]), b[p:]...)...)
			case 1: // delete
				if p < len(b) {
					b = append(b[:p], b[min(len(b), p+r.Intn(8)+1):]...)
				}
			case 2: // flip
				if p < len(b) {
					b[p] = byte(r.Intn(256))
				}
			}
		}
		checkNoPanic(t, string(b))
	}
}

func FuzzEditCorefile(f *testing.F) {
	for _, s := range seedCorefiles(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) { checkNoPanic(t, in) })
}

func checkNoPanic(t *testing.T, in string) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic on %q: %v", in, p)
		}
	}()
	e, err := editCorefile(in, "clusterset.local")
	if err != nil {
		if strings.HasPrefix(err.Error(), "internal error") {
			t.Fatalf("%v on %q", err, in)
		}
		return
	}
	again, err := editCorefile(e.out, "clusterset.local")
	if err != nil || again.changed || again.out != e.out {
		t.Fatalf("not idempotent on %q: %v", in, err)
	}
}

func seedCorefiles(tb testing.TB) []string {
	files, _ := filepath.Glob("testdata/*.Corefile")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestRemoveWordsQuotes: a cut that would leave a quote open is refused,
// though the line alone still lexes to the words that should stay (an open
// quote ends at the end of the input); a quoted zone is cut whole.
func TestRemoveWordsQuotes(t *testing.T) {
	lines := []string{`    multicluster other.local "p clusterset.local"clusterset.local`}
	if err := removeWords(lines, 1, "clusterset.local."); err == nil || !isRefusal(err) {
		t.Errorf("got %v and %q, want a refusal", err, lines[0])
	}
	lines = []string{"\tkubernetes cluster.local \"CLUSTERSET.local.\" x # clusterset.local\r"}
	if err := removeWords(lines, 1, "clusterset.local."); err != nil || lines[0] != "\tkubernetes cluster.local x # clusterset.local\r" {
		t.Errorf("got %v and %q", err, lines[0])
	}
}

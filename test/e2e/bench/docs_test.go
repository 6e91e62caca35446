package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestBenchDocs runs hack/bench-docs.sh over pages of its markers, running
// go tests and no benchmark: each block is filled from its command's newest
// output, the summaries of several runs make one table, and a block whose
// command never ran stays as it was; a page it cannot fill safely, or a
// command that fails, leaves the page as it was.
func TestBenchDocs(t *testing.T) {
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, page := filepath.Join(dir, "store"), filepath.Join(dir, "page.md")
	files := map[string]string{
		"store/main.md":         "Run of main.\n\n| t |\n|---|\n| 1 |\n",
		"store/main-summary.md": "Summary:\n\n| figure | value |\n|---|---|\n| a | 1 |\n",
		"store/soak-summary.md": "Summary:\n\n| figure | value |\n|---|---|\n| b | 2 |\n",
		"page.md": "# Page\n\n<!-- summary: main in-cluster soak -->\nold summary\n<!-- end -->\n\n" +
			"<!-- bench main: -scale -->\nold main\n<!-- end -->\n\n" +
			"<!-- bench in-cluster: -scale -in-cluster -->\nold in-cluster\n<!-- end -->\n\n" +
			"<!-- go test: -run XXX -bench ServeDNSNXDOMAIN -benchtime 1x . -->\nold go\n<!-- end -->\ntail\n",
	}
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	docs := func(names ...string) error {
		cmd := exec.Command("bash", append([]string{filepath.Join(repo, "hack", "bench-docs.sh"), "-page", page}, names...)...)
		cmd.Env = append(os.Environ(), "BENCH_DOCS_STORE="+store)
		out, err := cmd.CombinedOutput()
		t.Logf("hack/bench-docs.sh %s:\n%s", strings.Join(names, " "), out)
		return err
	}
	if err := docs("go"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const goMarker = "<!-- go test: -run XXX -bench ServeDNSNXDOMAIN -benchtime 1x . -->\n\n"
	want := "# Page\n\n<!-- summary: main in-cluster soak -->\n\n| figure | value |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n<!-- end -->\n\n" +
		"<!-- bench main: -scale -->\n\nRun of main.\n\n| t |\n|---|\n| 1 |\n\n<!-- end -->\n\n" +
		"<!-- bench in-cluster: -scale -in-cluster -->\nold in-cluster\n<!-- end -->\n\n" +
		goMarker
	before, goBlock, _ := strings.Cut(string(got), goMarker)
	if before+goMarker != want {
		t.Errorf("page up to the go test block:\n%s\nwant:\n%s", before, want)
	}
	goWant := regexp.MustCompile("^`go test -run XXX -bench ServeDNSNXDOMAIN -benchtime 1x .` at [0-9a-f]+, [0-9-]+ [0-9:]+ UTC, on .+:\n\n" +
		`\| package \| benchmark \| iterations \| figures \|\n\|---\|---\|---\|---\|\n` +
		"\\| github.com/clustersetdns/multicluster \\| `BenchmarkServeDNSNXDOMAIN` \\| 1 \\| [0-9.]+ ns/op(, [0-9.]+ [^,|]+)* \\|\n\n<!-- end -->\ntail\n$")
	if !goWant.MatchString(goBlock) {
		t.Errorf("the go test block and after:\n%s\nwant it to match %s", goBlock, goWant)
	}

	// A page or an output that cannot be filled safely stops it before any
	// command runs; a command that fails stops it, its block as it was.
	for _, tc := range []struct{ why, page string }{
		{"a block without its end", "<!-- bench main: -scale -->\nold main\n"},
		{"a block without its end before another", "<!-- bench main: -scale -->\nold main\n\nprose\n<!-- bench soak: -soak 5 -->\nold soak\n<!-- end -->\n"},
		{"two runs of one name", "<!-- bench main: -scale -->\nold\n<!-- end -->\n<!-- bench main: -soak 5 -->\nold\n<!-- end -->\n"},
		{"an output that reads as a marker", "<!-- bench marker: -scale -->\nold\n<!-- end -->\n"},
		{"a go test that fails", "<!-- go test: -run XXX -bench . ./no-such-package -->\nold go\n<!-- end -->\n"},
	} {
		if err := os.WriteFile(filepath.Join(store, "marker.md"), []byte("text\n<!-- end -->\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(page, []byte(tc.page), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := docs("go"); err == nil {
			t.Errorf("%s: hack/bench-docs.sh succeeded", tc.why)
		}
		if got, err := os.ReadFile(page); err != nil || string(got) != tc.page {
			t.Errorf("%s: the page became %q (%v), want it as it was", tc.why, got, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if goOut, _ := filepath.Glob(filepath.Join(store, "go-*")); len(goOut) != 1 {
		t.Errorf("the store's go test outputs: %v, want the one that succeeded", goOut)
	}
}

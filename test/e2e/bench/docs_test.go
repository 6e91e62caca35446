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

// TestBenchDocs runs hack/bench-docs.sh over a page of its markers, running
// one go test and no benchmark: each block is filled from its command's
// newest output, the summaries of several runs make one table, a block
// whose command never ran stays as it was, and a page with a block that has
// no end is left as it was.
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

	broken := "<!-- bench main: -scale -->\nold main\n"
	if err := os.WriteFile(page, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := docs("none"); err == nil {
		t.Error("a block without its end: hack/bench-docs.sh succeeded")
	}
	if got, err := os.ReadFile(page); err != nil || string(got) != broken {
		t.Errorf("a block without its end: the page became %q (%v), want it as it was", got, err)
	}
}

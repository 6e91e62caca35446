package main

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCharts: a report with QPS results and footprints gives the three
// charts, each a well-formed SVG that names every server it plots; one with
// footprints only gives no QPS chart.
func TestCharts(t *testing.T) {
	r := &report{mixes: []mix{{Key: "a", Label: "A", Floor: true}, {Key: "srv", Label: "SRV"}}}
	for round := range 3 {
		for _, s := range []string{"floor", "stock", "ours"} {
			for _, m := range r.mixes {
				if s == "floor" && !m.Floor {
					continue
				}
				r.results = append(r.results, perfResult{Server: s, Mix: m.Key, Round: round, QPS: 1000 * float64(1+round+len(s))})
			}
		}
	}
	for _, n := range []int{2000, 10000, 100000} {
		for _, s := range []string{"stock", "ours"} {
			r.footprints = append(r.footprints, footprint{Server: s + "-scale", Imports: n, ReadyIn: time.Duration(n) * time.Millisecond,
				Settled: reading{mem: mem{Anon: n / 10}}})
		}
	}
	dir := t.TempDir()
	got, err := r.charts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"qps.svg", "memory.svg", "ready.svg"}; !slices.Equal(got, want) {
		t.Fatalf("charts %q, want %q", got, want)
	}
	names := map[string][]string{"qps.svg": {"floor", "stock", "ours", "SRV"}, "memory.svg": {"stock", "ours"}, "ready.svg": {"stock", "ours"}}
	for _, name := range got {
		text := svgText(t, filepath.Join(dir, name))
		for _, want := range names[name] {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not show %q", name, want)
			}
		}
	}

	r.results = nil
	got, err = r.charts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, "qps.svg") {
		t.Errorf("charts %q without QPS results", got)
	}
}

// svgText checks that the file is an SVG document and returns its text.
func svgText(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", path, root)
	}
	return text.String()
}

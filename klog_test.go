package multicluster

import (
	"bytes"
	"errors"
	golog "log"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"k8s.io/klog/v2"
)

// client-go logs through klog; once the plugin is set up, its lines are the
// plugin's.
func TestKlogGoesThroughThePluginLogger(t *testing.T) {
	var buf bytes.Buffer
	golog.SetOutput(&buf)
	defer golog.SetOutput(discard{})
	if err := setup(caddy.NewTestController("dns", "multicluster")); err != nil {
		t.Fatal(err)
	}

	klog.InfoS("Watch close", "reflector", "pkg/mod/k8s.io/client-go/tools/cache/reflector.go:1", "type", "*unstructured.Unstructured")
	klog.ErrorS(errors.New("connection refused"), "Failed to watch")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`[INFO] plugin/multicluster: "msg"="Watch close" "reflector"=`, `[ERROR] plugin/multicluster: "msg"="Failed to watch" "error"="connection refused"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q, want it to hold %q", i, lines[i], want)
		}
	}
	if strings.Contains(buf.String(), `"level"`) {
		t.Errorf("klog's verbosity level is noise in CoreDNS's log: %s", buf.String())
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

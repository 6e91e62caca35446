package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestReadProber: a failed lookup is excused only when its second try
// answered and an endpoint of the DNS Service terminated while it ran (or
// had left the slices at most 3 s before); every other failure counts.
func TestReadProber(t *testing.T) {
	at := func(sec int64) time.Time { return time.Unix(sec, 0) }
	tr := &terminations{open: map[string]time.Time{}, spans: [][2]time.Time{{at(100), at(110)}}}
	log := `90 rounds 10
95 fail a since 94 again answered
105 fail b since 100 again answered
106 fail c since 106 again failed
111 fail d since 111 again answered
113 fail e since 113 again answered
114 fail f since 114 again answered
120 fail g
130 rounds 60
`
	fails, explained, rounds := readProber(log, 92, tr)
	// a: before any termination; c: its second try failed; f: 4 s after
	// the endpoint left; g: a line without its second try.
	if want := []string{"95 fail a since 94 again answered", "106 fail c since 106 again failed",
		"114 fail f since 114 again answered", "120 fail g"}; !slices.Equal(fails, want) {
		t.Errorf("failed:\n%q\nwant\n%q", fails, want)
	}
	if want := []string{"105 fail b since 100 again answered", "111 fail d since 111 again answered",
		"113 fail e since 113 again answered"}; !slices.Equal(explained, want) {
		t.Errorf("explained:\n%q\nwant\n%q", explained, want)
	}
	if rounds != 0 {
		t.Errorf("rounds %d, want 0: one rounds line since 92", rounds)
	}
	if _, _, rounds := readProber(log, 0, tr); rounds != 50 {
		t.Errorf("rounds %d, want 50", rounds)
	}
	// An endpoint still terminating explains a failure until now.
	tr.open["10.244.0.9"] = at(200)
	if _, explained, _ := readProber("300 fail h since 299 again answered\n", 0, tr); len(explained) != 1 {
		t.Errorf("a failure while an endpoint terminates: explained %q", explained)
	}
}

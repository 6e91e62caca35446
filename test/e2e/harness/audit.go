package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// AuditEvents returns the requests of user ("": of every user) from since
// on, from the audit log that Options.Audit turns on: each request once,
// when it completed (stage ResponseComplete), but a watch when it started
// (ResponseStarted).
func (e *Env) AuditEvents(user string, since time.Time) ([]auditv1.Event, error) {
	if e.auditLog == "" {
		return nil, errors.New("the control plane was started without Options.Audit")
	}
	f, err := os.Open(e.auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, err
		}
		stage := auditv1.StageResponseComplete
		if ev.Verb == "watch" {
			stage = auditv1.StageResponseStarted
		}
		if ev.Stage != stage || (user != "" && ev.User.Username != user) || ev.StageTimestamp.Time.Before(since) {
			continue
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// QuietWindow is how long an idle replica's requests are counted: a little
// over a minute, so that a once-a-minute request shows.
const QuietWindow = 65 * time.Second

// BeyondWatches drops the watches: what a replica asks beyond them.
func BeyondWatches(evs []auditv1.Event) []auditv1.Event {
	var out []auditv1.Event
	for _, ev := range evs {
		if ev.Verb != "watch" {
			out = append(out, ev)
		}
	}
	return out
}

// AuditSummary counts requests by verb and path.
func AuditSummary(evs []auditv1.Event) string {
	n := map[string]int{}
	for _, ev := range evs {
		path, _, _ := strings.Cut(ev.RequestURI, "?")
		n[ev.Verb+" "+path]++
	}
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

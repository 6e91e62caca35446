package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// checkServer asks s each mix's sample name with dig and checks the answer;
// it returns one line per dig for the report.
func checkServer(s *server, mixes []mix, fx fixture) ([]string, error) {
	var lines []string
	for _, m := range mixes {
		if s.Name == "floor" && !m.Floor {
			continue
		}
		r, err := harness.Dig(s.Port, m.Sample, m.SampleType)
		if err != nil {
			return lines, fmt.Errorf("%s: %w", s.Name, err)
		}
		if r.Rcode != "NOERROR" {
			return lines, fmt.Errorf("%s: %s %s: %s, want NOERROR\n%s", s.Name, m.Sample, m.SampleType, r.Rcode, r)
		}
		var want []string
		switch {
		case s.Name == "floor":
			// whoami answers every name: the client's address, in the
			// additional section.
		case m.Key == "a":
			want = []string{strings.ToLower(m.Sample) + " a " + importIP(0)}
		case m.Key == "srv":
			want = []string{fmt.Sprintf("%s srv 0 100 %d %s", strings.ToLower(m.Sample), portNumber, fx.name(0))}
		case m.Key == "headless":
			for c := range fx.clusters {
				for e := range fx.endpoints {
					want = append(want, headlessFQDN()+" a "+endpointIP(c, e))
				}
			}
			slices.Sort(want)
		}
		got := harness.Briefs(r.Answer)
		if want != nil && !slices.Equal(got, want) {
			return lines, fmt.Errorf("%s: %s %s: answer\n  %s\nwant\n  %s\n%s", s.Name, m.Sample, m.SampleType,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "), r)
		}
		summary := fmt.Sprintf("%d answer records", len(r.Answer))
		if len(got) == 1 {
			summary = got[0]
		}
		if s.Name == "floor" {
			summary = fmt.Sprintf("%d additional records (whoami)", len(r.Additional))
		}
		lines = append(lines, fmt.Sprintf("%-5s dig %s %s -> %s, aa=%v: %s", s.Name, m.Sample, m.SampleType, r.Rcode, r.AA(), summary))
	}
	return lines, nil
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

package main

import (
	"fmt"

	"github.com/clustersetdns/multicluster/internal/contract"
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
		// The contract's check of an answer, on the samples of the bench's
		// own fixture; whoami answers every name with the client's address,
		// in the additional section, so only its rcode is checked.
		w := contract.Want{}
		switch {
		case s.Name == "floor":
		case m.Key == "a":
			w.Answer = []string{contract.A(m.Sample, importIP(0))}
		case m.Key == "srv":
			w.Answer = []string{contract.SRV(m.Sample, 100, portNumber, fx.name(0))}
		case m.Key == "headless":
			for c := range fx.clusters {
				for e := range fx.endpoints {
					w.Answer = append(w.Answer, contract.A(headlessFQDN(), endpointIP(c, e)))
				}
			}
		}

		if s.Name == "floor" {
			if r.Rcode != "NOERROR" {
				err = fmt.Errorf("rcode %s, want NOERROR", r.Rcode)
			}
		} else {
			// Stock's kubernetes plugin has the same default TTL.
			err = w.Check(r.Msg(), contract.TTL)
		}
		if err != nil {
			return lines, fmt.Errorf("%s: %s %s: %v\n%s", s.Name, m.Sample, m.SampleType, err, r)
		}
		got := contract.Briefs(r.Answer)
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

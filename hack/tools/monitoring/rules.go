package main

import (
	"fmt"
	"strings"

	m "github.com/clustersetdns/multicluster/metricname"
)

// runbook is where every alert's runbook line points: docs/troubleshooting.md,
// one heading per alert.
const runbook = "https://github.com/clustersetdns/multicluster/blob/main/docs/troubleshooting.md#"

// rule is one Prometheus alerting rule, in the shape of a rules file and of a
// PrometheusRule's spec.groups[].rules[].
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// specShape matches the versions of the spec/status shape, rootShape the
// version of the root shape: the two sides of a migration.
var (
	specShape = fmt.Sprintf(`%s=~"%s|%s"`, m.Version, m.V1alpha1, m.V1beta1)
	rootShape = fmt.Sprintf(`%s="%s"`, m.Version, m.V1alpha2)
)

// alerts are the plugin's alerting rules. Every expression names its metrics
// and labels through package metricname; docs/troubleshooting.md has a
// heading per alert (the runbook anchor is the alert's name in lower
// case).
func alerts() []ruleGroup {
	perInstance := func(expr string) string { return "sum by (job, instance) (" + expr + ")" }
	spec := perInstance(fmt.Sprintf("%s{%s}", m.ServiceImports, specShape))
	root := perInstance(fmt.Sprintf("%s{%s}", m.ServiceImports, rootShape))
	specBefore := perInstance(fmt.Sprintf("%s{%s} offset 6h", m.ServiceImports, specShape))
	rootBefore := perInstance(fmt.Sprintf("%s{%s} offset 6h", m.ServiceImports, rootShape))

	rules := []rule{
		{
			Alert: "MulticlusterNotSynced",
			Expr:  fmt.Sprintf("%s == 0", m.Synced),
			For:   "5m",
			Labels: map[string]string{
				"severity": "critical",
			},
			Annotations: map[string]string{
				"summary": "CoreDNS {{ $labels.instance }} has not synced with the API server for 5 minutes and answers SERVFAIL in the clusterset zone.",
			},
		},
		{
			Alert: "MulticlusterServfailRatioHigh",
			Expr: fmt.Sprintf(`sum by (job) (rate(%[1]s{%[2]s="%[3]s"}[5m])) / sum by (job) (rate(%[1]s[5m])) > 0.01`,
				m.Responses, m.Result, m.ServerFailure),
			For: "10m",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary": "{{ $value | humanizePercentage }} of the clusterset answers of {{ $labels.job }} are SERVFAIL.",
			},
		},
		{
			Alert: "MulticlusterObjectsSkipped",
			// A counter that appears with its first skip has no earlier sample
			// for increase() to compare with: "unless … offset" catches it, in
			// a replica that has run for longer than the window. A replica
			// that starts reports the bad objects already there, which are
			// not new, so it waits the window out.
			Expr: fmt.Sprintf(`max by (job, %[2]s, %[3]s) (increase(%[1]s[15m])) > 0 `+
				`or max by (job, %[2]s, %[3]s) ((%[1]s unless %[1]s offset 15m) and on (job, instance) time() - %[4]s > 900) > 0`,
				m.SkippedObjects, m.Kind, m.Reason, m.ProcessStart),
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary": "{{ $labels.job }} left out {{ $labels.kind }} objects in the last 15 minutes: {{ $labels.reason }}.",
			},
		},
		{
			Alert: "MulticlusterVersionUnread",
			Expr:  fmt.Sprintf("max by (job, %s) (%s) == 1", m.Version, m.UnreadVersions),
			For:   "15m",
			Labels: map[string]string{
				"severity": "warning",
			},
			Annotations: map[string]string{
				"summary": "The API server serves ServiceImport {{ $labels.version }}, which {{ $labels.job }} is configured not to read.",
			},
		},
		{
			Alert: "MulticlusterMigrationStuck",
			// Both shapes answer services, and neither count has gone down in
			// 6 hours: a migration between them that started and stopped. A
			// new series (a restarted replica) has no sample 6 hours back, so
			// it cannot fire before it has one.
			Expr: fmt.Sprintf("%[1]s > 0 and on (job, instance) %[2]s > 0 and on (job, instance) %[1]s >= %[3]s and on (job, instance) %[2]s >= %[4]s",
				spec, root, specBefore, rootBefore),
			For: "30m",
			Labels: map[string]string{
				"severity": "info",
			},
			Annotations: map[string]string{
				"summary": "{{ $labels.instance }} has answered services from both ServiceImport shapes for more than 6 hours without progress.",
			},
		},
	}
	for i := range rules {
		rules[i].Annotations["runbook_url"] = runbook + strings.ToLower(rules[i].Alert)
	}
	return []ruleGroup{{Name: "coredns-multicluster", Rules: rules}}
}

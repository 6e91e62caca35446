package main

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/clustersetdns/multicluster/cache"
)

// neededRules are the rules of deploy/rbac.yaml's ClusterRole, what the
// plugin needs (TestNeededRulesMatchDeploy keeps the two equal).
var neededRules = []rbacv1.PolicyRule{
	{
		APIGroups: []string{cache.ServiceImportResource.Group},
		Resources: []string{cache.ServiceImportResource.Resource},
		Verbs:     []string{"list", "watch"},
	},
	{
		APIGroups: []string{"discovery.k8s.io"},
		Resources: []string{"endpointslices"},
		Verbs:     []string{"list", "watch"},
	},
	{
		APIGroups:     []string{"apiextensions.k8s.io"},
		Resources:     []string{"customresourcedefinitions"},
		ResourceNames: []string{cache.ServiceImportCRD},
		Verbs:         []string{"get", "list", "watch"},
	},
	{
		APIGroups:     []string{cache.ClusterPropertyResource.Group},
		Resources:     []string{cache.ClusterPropertyResource.Resource},
		ResourceNames: []string{cache.ClusterIDProperty},
		Verbs:         []string{"get", "list", "watch"},
	},
}

// missingRules returns the rules of need that have rules do not grant in
// full, in need's order. A rule is granted when every combination of its API
// groups, resources, verbs and resource names is allowed by some rule of
// have, as the RBAC authorizer decides ("*" matches anything; a rule with
// resource names allows only those names).
func missingRules(have, need []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, n := range need {
		if !granted(have, n) {
			out = append(out, n)
		}
	}
	return out
}

func granted(have []rbacv1.PolicyRule, n rbacv1.PolicyRule) bool {
	names := n.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	for _, g := range n.APIGroups {
		for _, r := range n.Resources {
			for _, v := range n.Verbs {
				for _, name := range names {
					if !slices.ContainsFunc(have, func(h rbacv1.PolicyRule) bool { return allows(h, g, r, v, name) }) {
						return false
					}
				}
			}
		}
	}
	return true
}

func allows(h rbacv1.PolicyRule, group, resource, verb, name string) bool {
	has := func(list []string, s string) bool {
		return slices.Contains(list, s) || slices.Contains(list, "*")
	}
	if !has(h.APIGroups, group) || !has(h.Resources, resource) || !has(h.Verbs, verb) {
		return false
	}
	return len(h.ResourceNames) == 0 || (name != "" && slices.Contains(h.ResourceNames, name))
}

// describeRule is a rule in a few words, for the command's output.
func describeRule(r rbacv1.PolicyRule) string {
	var res []string
	for _, g := range r.APIGroups {
		for _, x := range r.Resources {
			s := x
			if g != "" {
				s += "." + g
			}
			for _, n := range r.ResourceNames {
				res = append(res, s+"/"+n)
			}
			if len(r.ResourceNames) == 0 {
				res = append(res, s)
			}
		}
	}
	return fmt.Sprintf("%s %s", strings.Join(res, ","), strings.Join(r.Verbs, ","))
}

package main

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/clustersetdns/multicluster/cache"
)

// neededRules are the rules of deploy/rbac.yaml's ClusterRole, what the
// plugin needs, and those of the ClusterRole install creates
// (TestNeededRulesMatchDeploy keeps the two equal).
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

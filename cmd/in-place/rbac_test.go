package main

import (
	"errors"
	"io"
	"os"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestNeededRulesMatchDeploy: the rules install adds are those of
// deploy/rbac.yaml's ClusterRole, the one the standalone Deployment gets.
func TestNeededRulesMatchDeploy(t *testing.T) {
	f, err := os.Open("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := yaml.NewYAMLOrJSONDecoder(f, 4096)
	found := 0
	for {
		var r rbacv1.ClusterRole
		err := d.Decode(&r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != "ClusterRole" {
			continue
		}
		found++
		if !reflect.DeepEqual(r.Rules, neededRules) {
			t.Errorf("deploy/rbac.yaml's ClusterRole %s has the rules\n%+v\nneededRules are\n%+v", r.Name, r.Rules, neededRules)
		}
	}
	if found != 1 {
		t.Errorf("deploy/rbac.yaml has %d ClusterRoles, want 1", found)
	}
}

func TestMissingRules(t *testing.T) {
	rule := func(groups, resources, verbs, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	l := func(s ...string) []string { return s }
	for _, c := range []struct {
		name string
		have []rbacv1.PolicyRule
		want []int // indexes into neededRules
	}{
		{"kubeadm", kubeadmRules(t), []int{0, 2, 3}},
		{"none", nil, []int{0, 1, 2, 3}},
		{"cluster-admin", []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"), nil)}, nil},
		{"all of deploy/rbac.yaml", neededRules, nil},
		{"helm chart with multiclusterEnable", append(kubeadmRules(t), rule(l("multicluster.x-k8s.io"), l("serviceexports", "serviceimports"), l("list", "watch"), nil)), []int{2, 3}},
		{"a verb missing", append(kubeadmRules(t), rule(l("multicluster.x-k8s.io"), l("serviceimports"), l("list"), nil)), []int{0, 2, 3}},
		{"verbs split over rules", append(kubeadmRules(t),
			rule(l("multicluster.x-k8s.io"), l("serviceimports"), l("list"), nil),
			rule(l("multicluster.x-k8s.io"), l("serviceimports"), l("watch"), nil)), []int{2, 3}},
		{"names do not grant all", append(kubeadmRules(t), rule(l("multicluster.x-k8s.io"), l("serviceimports"), l("list", "watch"), l("one"))), []int{0, 2, 3}},
		{"CRDs without names grant the named one", append(kubeadmRules(t), rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("*"), nil)), []int{0, 3}},
		{"another CRD's name", append(kubeadmRules(t), rule(l("apiextensions.k8s.io"), l("customresourcedefinitions"), l("get", "list", "watch"), l("serviceexports.multicluster.x-k8s.io"))), []int{0, 2, 3}},
		{"wrong group", append(kubeadmRules(t), rule(l(""), l("serviceimports"), l("list", "watch"), nil)), []int{0, 2, 3}},
	} {
		var want []rbacv1.PolicyRule
		for _, i := range c.want {
			want = append(want, neededRules[i])
		}
		if got := missingRules(c.have, neededRules); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: missing %+v, want %+v", c.name, got, want)
		}
	}
}

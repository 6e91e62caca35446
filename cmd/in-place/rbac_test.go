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

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// With less than list and watch on its two resources the plugin logs one
// clear permission error, stays not ready and answers SERVFAIL, without
// crashing or flooding the log; granted the role, it recovers by itself.
func TestTooFewPermissions(t *testing.T) {
	ctx, cancel := harness.Context(3 * time.Minute)
	defer cancel()
	const user = "coredns-multicluster-getonly"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{cache.ServiceImportResource.Group}, Resources: []string{cache.ServiceImportResource.Resource}, Verbs: []string{"get"}},
		},
	}
	id, err := env.Identity(ctx, user, role)
	if err != nil {
		t.Fatal(err)
	}
	readyPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dnsSrv := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf("clusterset.local:%d {\n\tbind 127.0.0.1\n\terrors\n\tready 127.0.0.1:%d\n\t%s}\n",
				port, readyPort, strings.ReplaceAll(harness.MulticlusterBlock(id.Kubeconfig, "startup_timeout 1s"), "\n", "\n\t"))
		},
	})
	ready := func() bool { return readyOK(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)) }

	const name = "web.demo.svc.clusterset.local."
	checkFailsQuietlyWithout(t, dnsSrv, name, ready)

	// Grant the plugin's role: it recovers without a restart.
	grantPluginRole(ctx, t, user)
	harness.Eventually(t, 30*time.Second, func() error {
		if !ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	r := dig(t, dnsSrv, name, "A")
	if r.Rcode != "NOERROR" || len(r.Answer) == 0 {
		t.Errorf("after the grant: %s", r)
	}
}

// readyOK is whether the ready endpoint at url answers 200 OK.
func readyOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// checkFailsQuietlyWithout checks, for 12s, that dnsSrv without permission
// answers name with SERVFAIL and is not ready, and that it logged the
// denial once, without panic or flood.
func checkFailsQuietlyWithout(t *testing.T, dnsSrv *harness.CoreDNS, name string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if r := dig(t, dnsSrv, name, "A"); r.Rcode != "SERVFAIL" {
			t.Fatalf("without permission: %s, want SERVFAIL\n%s", r.Rcode, r)
		}
		if ready() {
			t.Fatal("ready without permission")
		}
		time.Sleep(time.Second)
	}
	out := dnsSrv.Output()
	if n := strings.Count(out, "permission denied"); n != 1 {
		t.Errorf("%d permission errors logged, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "panic") {
		t.Errorf("panic:\n%s", out)
	}
	if lines := strings.Count(out, "\n"); lines > 25 {
		t.Errorf("%d log lines in 12s: a flood\n%s", lines, harness.Abridge(out, 20, 20))
	}
}

// grantPluginRole binds deploy/rbac.yaml's ClusterRole to user.
func grantPluginRole(ctx context.Context, t *testing.T, user string) {
	t.Helper()
	pluginRole, err := harness.ClusterRoleFromFile(filepath.Join(env.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-granted"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pluginRole.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := env.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

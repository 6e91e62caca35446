package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
	"github.com/clustersetdns/multicluster/test/e2e/sandbox"
)

// corednsChartValues is what deploy/coredns-chart/values.yaml sets of the
// official coredns chart's values.
type corednsChartValues struct {
	Image struct {
		Repository, Tag string
	}
	RBAC struct {
		Create             bool
		MulticlusterEnable bool `json:"multiclusterEnable"`
	}
	Servers []struct {
		Zones []struct {
			Zone, Scheme string
			UseTCP       bool `json:"use_tcp"`
		}
		Port    int
		Plugins []struct {
			Name, Parameters string
			ConfigBlock      string `json:"configBlock"`
		}
	}
}

// corefile is the Corefile the chart's templates/configmap.yaml makes of
// servers: per server its zones (scheme, zone) and port, then one line per
// plugin with its parameters and its configBlock in braces.
func (v *corednsChartValues) corefile() string {
	var b strings.Builder
	for _, s := range v.Servers {
		var keys []string
		for _, z := range s.Zones {
			keys = append(keys, z.Scheme+z.Zone)
		}
		fmt.Fprintf(&b, "%s:%d {\n", strings.Join(keys, " "), s.Port)
		for _, p := range s.Plugins {
			b.WriteString("    " + strings.TrimSpace(p.Name+" "+p.Parameters))
			if p.ConfigBlock != "" {
				b.WriteString(" {\n")
				for line := range strings.Lines(p.ConfigBlock) {
					b.WriteString("        " + strings.TrimRight(line, "\n") + "\n")
				}
				b.WriteString("    }")
			}
			b.WriteString("\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// TestCoreDNSChartValues: deploy/coredns-chart/values.yaml turns the
// official coredns chart's CoreDNS into one that answers clusterset.local
// next to cluster.local, with exactly the chart's own RBAC (its ClusterRole
// with rbac.multiclusterEnable, no read of the CRD). The Corefile its servers
// give runs in the image under runc, as a ServiceAccount bound to that role
// alone: both zones answer, and the missing CRD rule is logged once, the
// only denial. (The chart itself is on no registry this test can reach; its
// rendering with these values is checked by hand, see the closing notes.)
func TestCoreDNSChartValues(t *testing.T) {
	needRunc(t)
	var values corednsChartValues
	if err := yaml.Unmarshal([]byte(readRepoFile(t, "deploy/coredns-chart/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository+":"+values.Image.Tag != imageName || !values.RBAC.Create || !values.RBAC.MulticlusterEnable {
		t.Errorf("values: image %s:%s, rbac %+v; want %s and rbac.create and rbac.multiclusterEnable", values.Image.Repository, values.Image.Tag, values.RBAC, imageName)
	}
	if len(values.Servers) != 1 {
		t.Fatalf("%d servers, want the chart's one", len(values.Servers))
	}
	names := []string{}
	for _, p := range values.Servers[0].Plugins {
		names = append(names, p.Name)
	}
	if i := slices.Index(names, "multicluster"); i < 0 || i+1 >= len(names) || names[i+1] != "kubernetes" {
		t.Errorf("plugins %q: want multicluster just before kubernetes", names)
	}
	corefile := values.corefile()
	t.Logf("the Corefile of the values:\n%s", corefile)

	// The chart's ClusterRole, bound to a ServiceAccount of its own.
	ctx, cancel := harness.Context(5 * time.Minute)
	defer cancel()
	const ns, sa = "kube-system", "coredns-chart-values"
	role := chartClusterRole()
	role.Name = sa
	if _, err := env.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clientset.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, env, ns, sa, role.Rules)

	// The pod: deploy/deployment.yaml's, whose securityContext, probes
	// (health :8080, ready :8181) and Corefile volume match the chart's.
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(readRepoFile(t, "deploy/deployment.yaml")), &dep); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: dep.Spec.Template.Spec.Volumes[0].ConfigMap.Name},
		Data: map[string]string{"Corefile": corefile}}
	rootfs, img := podImage(t)
	pod, err := sandbox.StartPod(t, env, sandbox.PodOptions{Deployment: &dep, ConfigMaps: []*corev1.ConfigMap{cm},
		Token: token, Rootfs: rootfs, Image: img, UnprivilegedPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.WaitReady(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	answersClusterAndZone(ctx, t, env, pod)
	out := pod.Output()
	if n := strings.Count(out, "cannot watch the ServiceImport CRD"); n != 1 {
		t.Errorf("the missing CRD rule logged %d times, want once:\n%s", n, out)
	}
	// The chart grants no read of the ClusterProperty either: said once,
	// and the local cluster is unknown.
	if n := strings.Count(out, "cannot read ClusterProperty"); n != 1 {
		t.Errorf("the missing ClusterProperty rule logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(strings.ToLower(out), "forbidden"); n != 2 {
		t.Errorf("%d denials in the log, want only the CRD's and the ClusterProperty's:\n%s", n, out)
	}
}

// answersClusterAndZone asks a pod that runs the cluster's CoreDNS with the
// plugin: kubernetes.default.svc.cluster.local answers the kubernetes
// Service's address, and every contract question in the zone its answer. A
// cache in the cluster's Corefile lowers TTLs, so rcode and answer records
// are compared.
func answersClusterAndZone(ctx context.Context, t *testing.T, e *harness.Env, pod *sandbox.Pod) {
	t.Helper()
	svc, err := e.Clientset.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, func() error {
		r, err := pod.Dig("kubernetes.default.svc.cluster.local.", "A")
		if err == nil {
			if err = (contract.Want{Answer: []string{contract.A("kubernetes.default.svc.cluster.local.", svc.Spec.ClusterIP)}}).CheckAnswer(r.Msg()); err != nil {
				err = harness.Permanent(fmt.Errorf("kubernetes.default.svc.cluster.local A: %v\n%s", err, r))
			}
		}
		return err
	})
	asked := 0
	for _, tc := range contract.Cases {
		if !dns.IsSubDomain(apex, tc.Name) {
			continue
		}
		asked++
		r, err := pod.Dig(tc.Name, tc.Type, ownAddressOverTCP(tc)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.Want.CheckAnswer(r.Msg()); err != nil {
			t.Errorf("%s %s: %v\n%s", tc.Name, tc.Type, err, r)
		}
	}
	t.Logf("kubernetes.default.svc.cluster.local and %d contract questions answered by the cluster's CoreDNS with the plugin", asked)
}

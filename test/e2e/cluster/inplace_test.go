package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// kubeadm's CoreDNS objects, and what install adds beside them.
const (
	ns          = "kube-system"
	coredns     = "coredns"
	kubeadmRole = "system:coredns"
	pluginRBAC  = "coredns-multicluster-in-place" // the plugin's ClusterRole and ClusterRoleBinding
	state       = "coredns-multicluster-in-place" // the ConfigMap that keeps the originals
	installJob  = "coredns-multicluster-install"
	removeJob   = "coredns-multicluster-uninstall"
	// A name of the zone, and one of cluster.local, that the prober asks.
	zoneName    = "web.demo.svc.clusterset.local"
	zoneAddress = "10.42.0.10"
	clusterName = "kubernetes.default.svc.cluster.local"
)

// kubeadmObjects are kubeadm's CoreDNS objects that install changes.
type kubeadmObjects struct {
	cm   *corev1.ConfigMap
	dep  *appsv1.Deployment
	role *rbacv1.ClusterRole
}

// TestInPlaceJobs installs the plugin into kubeadm's CoreDNS with
// deploy/in-place/install.yaml, as an operator would with kubectl alone, and
// takes it out with uninstall.yaml, while a pod asks a cluster.local name
// and a clusterset.local one in a loop through 10.96.0.10:
//   - install: the Job completes after the real rollout (readiness through
//     /ready), the zone's names answer in the client pod, over UDP and TCP,
//     through dig, glibc and busybox; no cluster.local lookup fails; the
//     plugin's rules are in objects of their own, system:coredns is kubeadm's;
//   - kubeadm's objects applied again (kubeadm upgrade's effect) take the
//     plugin out; one more install (deploy/in-place.sh, the same command
//     from a checkout) puts it back;
//   - uninstall: kubeadm's objects as kubeadm made them, nothing of install
//     left, the zone's names NXDOMAIN, no cluster.local lookup failed.
func TestInPlaceJobs(t *testing.T) {
	ctx, cancel := harness.Context(30 * time.Minute)
	defer cancel()
	kubeadm := readKubeadmObjects(ctx, t)
	checkJobImage(t)
	dns := watchTerminations(t, ns, "kube-dns")
	if err := startPod(ctx, "prober", proberScript); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	zoneAnswers(t, false)

	runJob(ctx, t, "install.yaml", installJob)
	checkInstalled(ctx, t, kubeadm)
	everyPodAnswers(ctx, t, true)
	t.Logf("install: every CoreDNS pod answers the zone %.0fs after the Job was applied", time.Since(start).Seconds())
	checkProber(ctx, t, "prober", start, dns)

	t.Run("contract", testContract)
	t.Run("resolvers", testResolvers)
	t.Run("search list", testSearchList)
	t.Run("truncated", testTruncated)
	t.Run("idle", testIdle)

	// kubeadm upgrade's effect: kubeadm's objects applied again.
	upgrade := time.Now()
	if out, err := kubectl(ctx, "apply", "-f", filepath.Join(clusterDir, "kubeadm-coredns.yaml")); err != nil {
		t.Fatalf("kubeadm's objects again: %v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+coredns, "--timeout=5m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	everyPodAnswers(ctx, t, false)
	t.Logf("kubeadm's objects applied again: the zone is gone after %.0fs; installing again", time.Since(upgrade).Seconds())
	// This time from a checkout, as deploy/in-place.sh runs the command: the
	// pods' addresses are reachable from this machine too.
	runInPlace(ctx, t, "install", "--image", images["project"], "--wait-answers")
	checkInstalled(ctx, t, kubeadm)
	everyPodAnswers(ctx, t, true)
	checkProber(ctx, t, "prober", upgrade, dns)

	remove := time.Now()
	runJob(ctx, t, "uninstall.yaml", removeJob)
	checkUninstalled(ctx, t, kubeadm)
	everyPodAnswers(ctx, t, false)
	t.Logf("uninstall: the zone is gone %.0fs after the Job was applied", time.Since(remove).Seconds())
	checkProber(ctx, t, "prober", remove, dns)
	for _, f := range []string{"install.yaml", "uninstall.yaml"} {
		if out, err := kubectl(ctx, "delete", "--ignore-not-found", "-f", filepath.Join(env.Repo, "deploy", "in-place", f)); err != nil {
			t.Errorf("kubectl delete -f %s: %v\n%s", f, err, out)
		}
	}
}

// proberScript asks, every 100 ms, a cluster.local name and the zone's name
// with glibc's getent through the pod's resolv.conf. It prints each
// cluster.local failure (lookup) and each change of the zone name's answer.
var proberScript = prober(lookup("getent hosts "+clusterName, clusterName) + `
	if getent hosts ` + zoneName + ` >/dev/null; then now=answers; else now=fails; fi
	[ "$now" = "$zone" ] || { zone=$now; echo "$(date +%s) zone $now"; }`)

// checkJobImage checks that both Jobs run the image hack/cluster.sh holds
// as the project's: the one place an operator names it.
func checkJobImage(t *testing.T) {
	t.Helper()
	for _, f := range []string{"install.yaml", "uninstall.yaml"} {
		data, err := os.ReadFile(filepath.Join(env.Repo, "deploy", "in-place", f))
		if err != nil {
			t.Fatal(err)
		}
		var jobImages []string
		for doc := range strings.SplitSeq(string(data), "\n---\n") {
			var job batchv1.Job
			if err := yaml.Unmarshal([]byte(doc), &job); err != nil || job.Kind != "Job" {
				continue
			}
			for _, c := range job.Spec.Template.Spec.Containers {
				jobImages = append(jobImages, c.Image)
			}
		}
		if want := []string{images["project"]}; !slices.Equal(jobImages, want) {
			t.Errorf("%s: the Job's images %v, want %v (hack/cluster.sh images: project)", f, jobImages, want)
		}
	}
}

// runInPlace runs deploy/in-place.sh with args as the cluster's admin.
func runInPlace(ctx context.Context, t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(env.Repo, "deploy", "in-place.sh"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "GOWORK=off")
	out, err := cmd.CombinedOutput()
	t.Logf("$ deploy/in-place.sh %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("deploy/in-place.sh %s: %v", args[0], err)
	}
}

// runJob applies deploy/in-place/<file> and waits until its Job completes,
// logging how long that took and what the Job printed.
func runJob(ctx context.Context, t *testing.T, file, job string) {
	t.Helper()
	start := time.Now()
	if out, err := kubectl(ctx, "apply", "-f", filepath.Join(env.Repo, "deploy", "in-place", file)); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", file, err, out)
	}
	_, werr := kubectl(ctx, "-n", ns, "wait", "--for=condition=Complete", "job/"+job, "--timeout=8m")
	logs, _ := kubectl(ctx, "-n", ns, "logs", "job/"+job)
	if werr != nil {
		describe, _ := kubectl(ctx, "-n", ns, "describe", "job/"+job)
		t.Fatalf("job %s did not complete: %v\n%s\n%s", job, werr, logs, describe)
	}
	t.Logf("job %s completed in %.0fs:\n%s", job, time.Since(start).Seconds(), logs)
}

// zoneAnswers checks the zone's name in the client pod through the cluster
// DNS Service, or with server, at that address: the ServiceImport's address
// when the zone answers, NXDOMAIN when not.
func zoneAnswers(t *testing.T, answers bool, server ...string) {
	t.Helper()
	if err := zoneAnswer(answers, server...); err != nil {
		t.Error(err)
	}
}

// zoneAnswer is zoneAnswers' check, as an error.
func zoneAnswer(answers bool, server ...string) error {
	want := contract.NXDOMAIN()
	if answers {
		want = contract.Want{Answer: []string{contract.A(zoneName+".", zoneAddress)}}
	}
	r, err := dig(zoneName+".", "A", server...)
	if err != nil {
		return err
	}
	if err := want.CheckAnswer(r.Msg()); err != nil {
		return fmt.Errorf("%v\n%s", err, r)
	}
	return nil
}

// everyPodAnswers checks the zone's name at the address of every ready
// CoreDNS pod: once a Job or a rollout is done, no replica may answer
// otherwise than the others. Then through the Service, within serviceLag.
func everyPodAnswers(ctx context.Context, t *testing.T, answers bool) {
	t.Helper()
	pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && pod.Status.PodIP != "" && podReady(&pod) {
			zoneAnswers(t, answers, "@"+pod.Status.PodIP)
			asked++
		}
	}
	if asked == 0 {
		t.Fatal("no ready CoreDNS pod")
	}
	harness.Eventually(t, serviceLag, func() error { return zoneAnswer(answers) })
}

// serviceLag bounds how long the Service may still send a query to a
// replica that a finished rollout has replaced: the old pod answers through
// its lameduck (kubeadm's Corefile: 5 s) until kube-proxy, which programs
// the Service's endpoints after the EndpointSlice changed, stops sending it
// any (seen once: a lookup right after "rollout status" reached the old
// image).
const serviceLag = 15 * time.Second

func readKubeadmObjects(ctx context.Context, t *testing.T) kubeadmObjects {
	t.Helper()
	var o kubeadmObjects
	var err error
	c := env.Clientset
	if o.cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, coredns, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.dep, err = c.AppsV1().Deployments(ns).Get(ctx, coredns, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.role, err = c.RbacV1().ClusterRoles().Get(ctx, kubeadmRole, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkInstalled checks the objects after install: the image runs, ready
// through /ready; the Corefile has the multicluster line; the plugin's rules
// (deploy/rbac.yaml's) are bound to CoreDNS's ServiceAccount in objects of
// their own; system:coredns is kubeadm's.
func checkInstalled(ctx context.Context, t *testing.T, kubeadm kubeadmObjects) {
	t.Helper()
	now := readKubeadmObjects(ctx, t)
	ct := now.dep.Spec.Template.Spec.Containers[0]
	if ct.Image != images["project"] {
		t.Errorf("image %s, want %s", ct.Image, images["project"])
	}
	if p := ct.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
		t.Errorf("readiness probe %v, want kubeadm's /ready", p)
	}
	s := now.dep.Status
	if s.UpdatedReplicas != *now.dep.Spec.Replicas || s.ReadyReplicas != *now.dep.Spec.Replicas || s.Replicas != s.UpdatedReplicas {
		t.Errorf("the Job completed before the rollout did: %+v", s)
	}
	if !strings.Contains(now.cm.Data["Corefile"], "\n    multicluster clusterset.local\n") {
		t.Errorf("the Corefile has no multicluster line:\n%s", now.cm.Data["Corefile"])
	}
	if !reflect.DeepEqual(now.role.Rules, kubeadm.role.Rules) {
		t.Errorf("%s changed: %v, kubeadm's %v", kubeadmRole, now.role.Rules, kubeadm.role.Rules)
	}
	want, err := harness.ClusterRoleFromFile(filepath.Join(env.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role, err := env.Clientset.RbacV1().ClusterRoles().Get(ctx, pluginRBAC, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(role.Rules, want.Rules) {
		t.Errorf("clusterrole %s: %v, want deploy/rbac.yaml's %v", pluginRBAC, role.Rules, want.Rules)
	}
	b, err := env.Clientset.RbacV1().ClusterRoleBindings().Get(ctx, pluginRBAC, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: now.dep.Spec.Template.Spec.ServiceAccountName, Namespace: ns}}
	if b.RoleRef.Name != pluginRBAC || !reflect.DeepEqual(b.Subjects, sa) {
		t.Errorf("clusterrolebinding %s: %v to %v, want %s to %v", pluginRBAC, b.RoleRef, b.Subjects, pluginRBAC, sa)
	}
}

// checkUninstalled checks that kubeadm's objects are as kubeadm made them
// and nothing install made is left.
func checkUninstalled(ctx context.Context, t *testing.T, kubeadm kubeadmObjects) {
	t.Helper()
	after := readKubeadmObjects(ctx, t)
	if !reflect.DeepEqual(after.cm.Data, kubeadm.cm.Data) {
		t.Errorf("the ConfigMap is not kubeadm's:\n%v\nwant\n%v", after.cm.Data, kubeadm.cm.Data)
	}
	if !reflect.DeepEqual(after.dep.Spec.Template, kubeadm.dep.Spec.Template) {
		t.Errorf("the Deployment's template is not kubeadm's:\n%v\nwant\n%v", after.dep.Spec.Template, kubeadm.dep.Spec.Template)
	}
	if !reflect.DeepEqual(after.role.Rules, kubeadm.role.Rules) {
		t.Errorf("%s is not kubeadm's: %v", kubeadmRole, after.role.Rules)
	}
	c := env.Clientset
	gone := map[string]error{}
	_, gone["clusterrole/"+pluginRBAC] = c.RbacV1().ClusterRoles().Get(ctx, pluginRBAC, metav1.GetOptions{})
	_, gone["clusterrolebinding/"+pluginRBAC] = c.RbacV1().ClusterRoleBindings().Get(ctx, pluginRBAC, metav1.GetOptions{})
	_, gone["configmap/"+state] = c.CoreV1().ConfigMaps(ns).Get(ctx, state, metav1.GetOptions{})
	for what, err := range gone {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after uninstall: %v, want it gone", what, err)
		}
	}
}

// testContract asks every contract question of the zone from the client
// pod through 10.96.0.10, over UDP and over TCP. The questions whose answer
// names the address a query came in on (the apex NS glue) are left out:
// through a Service that is the pod's, not a fixed one.
func testContract(t *testing.T) {
	asked := 0
	for _, tc := range contract.Cases {
		if !dns.IsSubDomain(contract.Apex, tc.Name) || strings.Contains(fmt.Sprint(tc.Want), "127.0.0.1") {
			continue
		}
		for _, transport := range []string{"+notcp", "+tcp"} {
			r, err := dig(tc.Name, tc.Type, transport)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.Want.CheckAnswer(r.Msg()); err != nil {
				t.Errorf("%s %s %s: %v\n%s", tc.Name, tc.Type, transport, err, r)
			}
			asked++
		}
	}
	t.Logf("%d contract questions answered through the cluster DNS Service (UDP and TCP)", asked)
}

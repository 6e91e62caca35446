package e2e

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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
	"github.com/clustersetdns/multicluster/test/e2e/sandbox"
)

// kubeadm's CoreDNS objects, as kubeadm names them.
const (
	kubeadmNS   = "kube-system"
	kubeadmName = "coredns"
	kubeadmRole = "system:coredns"
	kubeadmUser = "system:serviceaccount:kube-system:coredns"
)

// kubeadmObjects are the objects deploy/in-place.sh changes.
type kubeadmObjects struct {
	cm   *corev1.ConfigMap
	dep  *appsv1.Deployment
	role *rbacv1.ClusterRole
}

// TestInPlaceKubeadm puts the plugin into a kubeadm cluster's own CoreDNS
// with deploy/in-place.sh, on a control plane of its own (with an audit
// log) that holds kubeadm's CoreDNS objects exactly as kubeadm v1.37.2
// renders them (hack/realenv/kubeadmdns, kubeadm's own code) and the
// objects of testdata/. Then the coredns Deployment's container runs under
// runc with the resulting ConfigMap and the coredns ServiceAccount's own
// token: kubernetes.default.svc.cluster.local and the contract's names
// answer, nothing is denied, and the ServiceAccount makes no more requests
// while idle than the plugin alone does (at most one a minute beyond its
// watches). uninstall gives the objects back as kubeadm made them.
func TestInPlaceKubeadm(t *testing.T) {
	needRunc(t)
	manifests, err := os.ReadFile(filepath.Join(env.BinDir, "kubeadm-coredns.yaml"))
	if err != nil {
		t.Fatalf("%v: hack/realenv/build.sh writes it", err)
	}
	t.Parallel()
	e := startKubeadmEnv(t)
	ctx, cancel := harness.Context(10 * time.Minute)
	defer cancel()
	objs, err := contract.ReadObjects(filepath.Join(env.Repo, "testdata"))
	if err == nil {
		err = e.ApplyAll(ctx, objs)
	}
	if err == nil {
		_, err = e.ApplyYAML(ctx, string(manifests))
	}
	if err != nil {
		t.Fatal(err)
	}
	kubeadm := readKubeadmObjects(ctx, t, e)
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := e.WriteAdminKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	// No kubelet here: --wait 0 leaves out waiting for the rollout.
	runInPlace(ctx, t, kubeconfig, "install", "--image", imageName, "--wait", "0")
	installed := readKubeadmObjects(ctx, t, e)
	checkInstalledInPlace(t, installed)

	// The Deployment's container, as the kubelet would start it now.
	rootfs, img := podImage(t)
	token := serviceAccountToken(t, e, kubeadmNS, kubeadmName, installed.role.Rules)
	pod, err := sandbox.StartPod(t, e, sandbox.PodOptions{Deployment: installed.dep, ConfigMaps: []*corev1.ConfigMap{installed.cm},
		Token: token, Rootfs: rootfs, Image: img, UnprivilegedPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.WaitReady(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	answersClusterAndZone(ctx, t, e, pod)
	checkKubeadmPodIdle(t, e, pod)

	runInPlace(ctx, t, kubeconfig, "uninstall", "--wait", "0")
	checkUninstalledInPlace(ctx, t, e, kubeadm)
}

// startKubeadmEnv starts an API server with kubeadm's Service CIDR: its
// kube-dns Service has the address 10.96.0.10.
func startKubeadmEnv(t *testing.T) *harness.Env {
	t.Helper()
	e, err := harness.Start(harness.Options{Repo: env.Repo, Audit: true, APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/12"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}

// runInPlace runs deploy/in-place.sh with args as the admin of kubeconfig,
// logging its output.
func runInPlace(ctx context.Context, t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(env.Repo, "deploy", "in-place.sh"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "GOWORK=off")
	out, err := cmd.CombinedOutput()
	t.Logf("$ deploy/in-place.sh %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("deploy/in-place.sh %s: %v", args[0], err)
	}
}

// checkInstalledInPlace checks kubeadm's objects after install: the
// multicluster line in the Corefile, the image, the plugin's rules.
func checkInstalledInPlace(t *testing.T, installed kubeadmObjects) {
	t.Helper()
	corefile := installed.cm.Data["Corefile"]
	if !strings.Contains(corefile, "\n    multicluster clusterset.local\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n") {
		t.Errorf("the Corefile has no multicluster line just before kubernetes:\n%s", corefile)
	}
	if got := installed.dep.Spec.Template.Spec.Containers[0].Image; got != imageName {
		t.Errorf("image %s, want %s", got, imageName)
	}
	pluginRole, err := harness.ClusterRoleFromFile(filepath.Join(env.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pluginRole.Rules {
		if !slices.ContainsFunc(installed.role.Rules, func(have rbacv1.PolicyRule) bool { return reflect.DeepEqual(have, r) }) {
			t.Errorf("%s lacks the plugin's rule %v after install: %v", kubeadmRole, r, installed.role.Rules)
		}
	}
}

// checkKubeadmPodIdle checks that, idle, the ServiceAccount makes at most
// one request a minute beyond its watches, and that CoreDNS ran into no
// denial.
func checkKubeadmPodIdle(t *testing.T, e *harness.Env, pod *sandbox.Pod) {
	t.Helper()
	since := time.Now()
	time.Sleep(quietWindow)
	evs, err := e.AuditEvents(kubeadmUser, since)
	if err != nil {
		t.Fatal(err)
	}
	evs = beyondWatches(evs)
	t.Logf("idle for %s: %s made %d requests beyond its watches (%s)", quietWindow, kubeadmUser, len(evs), auditSummary(evs))
	if perMinute := float64(len(evs)) / quietWindow.Minutes(); perMinute > 1 {
		t.Errorf("idle, %.2f requests a minute beyond the watches, want at most 1: %s", perMinute, auditSummary(evs))
	}
	if out := strings.ToLower(pod.Output()); strings.Contains(out, "forbidden") || strings.Contains(out, "permission") || strings.Contains(out, "panic") {
		t.Errorf("CoreDNS ran into a denial:\n%s", pod.Output())
	}
}

// checkUninstalledInPlace checks that uninstall restored kubeadm's objects
// and removed the state install kept.
func checkUninstalledInPlace(ctx context.Context, t *testing.T, e *harness.Env, kubeadm kubeadmObjects) {
	t.Helper()
	after := readKubeadmObjects(ctx, t, e)
	if !reflect.DeepEqual(after.cm.Data, kubeadm.cm.Data) || !reflect.DeepEqual(after.cm.Labels, kubeadm.cm.Labels) || !reflect.DeepEqual(after.cm.Annotations, kubeadm.cm.Annotations) {
		t.Errorf("after uninstall, the ConfigMap is not kubeadm's:\n%v\nwant\n%v", after.cm, kubeadm.cm)
	}
	if !reflect.DeepEqual(after.dep.Spec.Template, kubeadm.dep.Spec.Template) || !reflect.DeepEqual(after.dep.Labels, kubeadm.dep.Labels) || !reflect.DeepEqual(after.dep.Annotations, kubeadm.dep.Annotations) {
		t.Errorf("after uninstall, the Deployment is not kubeadm's:\n%v\nwant\n%v", after.dep.Spec.Template, kubeadm.dep.Spec.Template)
	}
	if !reflect.DeepEqual(after.role.Rules, kubeadm.role.Rules) || !reflect.DeepEqual(after.role.Labels, kubeadm.role.Labels) || !reflect.DeepEqual(after.role.Annotations, kubeadm.role.Annotations) {
		t.Errorf("after uninstall, %s is not kubeadm's:\n%v\nwant\n%v", kubeadmRole, after.role.Rules, kubeadm.role.Rules)
	}
	const state = "coredns-multicluster-in-place" // where install keeps the originals
	if _, err := e.Clientset.CoreV1().ConfigMaps(kubeadmNS).Get(ctx, state, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap %s/%s after uninstall: %v, want it gone", kubeadmNS, state, err)
	}
}

func readKubeadmObjects(ctx context.Context, t *testing.T, e *harness.Env) kubeadmObjects {
	t.Helper()
	var o kubeadmObjects
	var err error
	if o.cm, err = e.Clientset.CoreV1().ConfigMaps(kubeadmNS).Get(ctx, kubeadmName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.dep, err = e.Clientset.AppsV1().Deployments(kubeadmNS).Get(ctx, kubeadmName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.role, err = e.Clientset.RbacV1().ClusterRoles().Get(ctx, kubeadmRole, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	return o
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

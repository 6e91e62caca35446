package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
	"github.com/clustersetdns/multicluster/test/e2e/sandbox"
)

// TestRuncImage runs the image under runc as the kubelet, through a CRI
// runtime, starts deploy/deployment.yaml's container: its securityContext,
// the ConfigMap's Corefile and a ServiceAccount token mounted read-only, no
// kubeconfig, and a network namespace of its own with loopback only, into
// which a forwarder brings the API server's 127.0.0.1:PORT. What happens
// (runc 1.1, Linux, cgroup v1):
//   - with net.ipv4.ip_unprivileged_port_start=0 in the pod (containerd 2.x's
//     CRI default): CoreDNS binds 53, serves the contract, ready and healthy;
//   - without it (containerd 1.x): exactly the same, thanks to the file
//     capability cap_net_bind_service=+ep of /coredns, which no_new_privs
//     lets stand because NET_BIND_SERVICE is already in the permitted set the
//     runtime gives the process;
//   - without `add: [NET_BIND_SERVICE]` (and without the sysctl): the
//     container never starts; the kernel refuses to exec a file whose +ep
//     capability the bounding set lacks, and runc says
//     `exec /coredns: operation not permitted`.
//
// sandbox.StartPod says how the kubelet's part is played.
func TestRuncImage(t *testing.T) {
	needRunc(t)
	dep, cm := runcManifests(t)
	rootfs, img := podImage(t)
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	// Left in place: the ClusterRole is the one PluginIdentity created.
	if _, err := env.ApplyYAML(ctx, readRepoFile(t, "deploy/rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	role, err := harness.ClusterRoleFromFile(filepath.Join(env.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, env, dep.Namespace, dep.Spec.Template.Spec.ServiceAccountName, role.Rules)

	for _, tc := range []struct {
		name           string
		sysctl, noAdd  bool           // ip_unprivileged_port_start=0; no add: [NET_BIND_SERVICE]
		wantRuncOutput *regexp.Regexp // when it must not start: runc's error
	}{
		{name: "containerd2_sysctl", sysctl: true},
		{name: "containerd1_no_sysctl"},
		{name: "no_NET_BIND_SERVICE", noAdd: true, wantRuncOutput: regexp.MustCompile(`exec:? "?/coredns"?: operation not permitted`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := dep.Spec.Template.Spec.Containers[0].SecurityContext.DeepCopy()
			if tc.noAdd {
				sc.Capabilities.Add = nil
			}
			pod, err := sandbox.StartPod(t, env, sandbox.PodOptions{Deployment: &dep, SecurityContext: sc, ConfigMaps: []*corev1.ConfigMap{&cm},
				Token: token, Rootfs: rootfs, Image: img, UnprivilegedPorts: tc.sysctl})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantRuncOutput != nil {
				if ok, err := pod.Exited(30 * time.Second); !ok || err == nil {
					t.Fatalf("runc run: exited %v, %v; want it to fail", ok, err)
				}
				if !tc.wantRuncOutput.MatchString(pod.Output()) {
					t.Errorf("runc run's output does not match %q:\n%s", tc.wantRuncOutput, pod.Output())
				}
				return
			}
			pid, err := pod.WaitRunning(30 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := pod.WaitReady(60 * time.Second); err != nil {
				t.Fatal(err)
			}
			if err := pod.Probe(pod.Container.LivenessProbe); err != nil {
				t.Error(err)
			}
			checkPortFloor(t, pod, tc.sysctl)
			checkPodProcess(t, pid, sc)
			checkContractInPod(t, pod)
		})
	}
}

// runcManifests are the Deployment and the ConfigMap of deploy/, whose
// Corefile must not name a kubeconfig.
func runcManifests(t *testing.T) (appsv1.Deployment, corev1.ConfigMap) {
	t.Helper()
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(readRepoFile(t, "deploy/deployment.yaml")), &dep); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(readRepoFile(t, "deploy/configmap.yaml")), &cm); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data["Corefile"], "kubeconfig") {
		t.Fatal("the Corefile names a kubeconfig; the pod must use its ServiceAccount")
	}
	return dep, cm
}

// checkPortFloor checks the port floor in the pod's network namespace, as
// the case says: 0 with the sysctl, else 1024.
func checkPortFloor(t *testing.T, pod *sandbox.Pod, sysctl bool) {
	t.Helper()
	var floor []byte
	if err := harness.InNetns(pod.Netns, func() (err error) {
		floor, err = os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
		return err
	}); err != nil || string(floor) != map[bool]string{true: "0\n", false: "1024\n"}[sysctl] {
		t.Errorf("ip_unprivileged_port_start in the pod: %q, %v", floor, err)
	}
}

// checkPodProcess checks the securityContext sc, as the kernel sees the
// process pid: its IDs, no new privileges, only NET_BIND_SERVICE, a
// read-only root filesystem.
func checkPodProcess(t *testing.T, pid int, sc *corev1.SecurityContext) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := strconv.FormatInt(*sc.RunAsUser, 10), strconv.FormatInt(*sc.RunAsGroup, 10)
	for field, want := range map[string]string{
		"Uid": strings.Repeat(uid+"\t", 3) + uid, "Gid": strings.Repeat(gid+"\t", 3) + gid, "NoNewPrivs": "1",
		"CapEff": "0000000000000400", "CapPrm": "0000000000000400", "CapBnd": "0000000000000400", // NET_BIND_SERVICE
		"CapInh": "0000000000000000", "CapAmb": "0000000000000000",
	} {
		if !strings.Contains(string(status), "\n"+field+":\t"+want+"\n") {
			t.Errorf("%s is not %q in /proc/%d/status:\n%s", field, want, pid, status)
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mountinfo)) {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !slices.Contains(strings.Split(f[5], ","), "ro") {
			t.Errorf("the root filesystem is not read-only: %s", line)
		}
	}
}

// checkContractInPod checks the contract over UDP, some over TCP, inside
// the pod, and that CoreDNS ran into no denial. Answers with the address a
// query came in on are asked over TCP only: the Corefile has no bind, and on
// the wildcard UDP socket CoreDNS does not know that address, so ns.dns has
// none over UDP.
func checkContractInPod(t *testing.T, pod *sandbox.Pod) {
	t.Helper()
	for _, tc := range contract.Cases {
		t.Run(caseName(tc), func(t *testing.T) { expectIn(t, pod, tc, ownAddressOverTCP(tc)...) })
	}
	t.Run("tcp", func(t *testing.T) {
		for _, tc := range []contract.Case{findCase(t, n("web.demo"), "A"), findCase(t, n("db.demo"), "SRV"), findCase(t, n("nosuch.demo"), "A")} {
			expectIn(t, pod, tc, "+tcp")
		}
	})
	if out := strings.ToLower(pod.Output()); strings.Contains(out, "forbidden") || strings.Contains(out, "permission") || strings.Contains(out, "not permitted") {
		t.Errorf("CoreDNS ran into a denial:\n%s", pod.Output())
	}
}

// needRunc ends the test where runc cannot run (not root, runc or ip
// missing): skipped on a developer's machine, failed under hack/test.sh
// (missing), which installs them.
func needRunc(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "runc and ip netns need root: run the tests as root")
	}
	for _, tool := range []string{"runc", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, "%s is missing (apt-get install runc iproute2)", tool)
		}
	}
}

// unpacked is the image, unpacked once for every test that runs it as a pod.
var unpacked struct {
	sync.Mutex
	rootfs string
	config *v1.Config
}

// podImage returns the image's root filesystem and its config, unpacking
// the tarball on first use. Pods mount the root read-only, so they share
// it; it lives in the shared control plane's directory, removed with it.
func podImage(t *testing.T) (rootfs string, config *v1.Config) {
	t.Helper()
	unpacked.Lock()
	defer unpacked.Unlock()
	if unpacked.config == nil {
		dir, err := os.MkdirTemp(env.TempDir(), "rootfs-")
		if err == nil {
			err = os.Chmod(dir, 0o755) // the container's /, for user 65532
		}
		if err != nil {
			t.Fatal(err)
		}
		img, err := sandbox.UnpackImage(imageTarball(t), imageName, dir)
		if err != nil {
			t.Fatal(err)
		}
		unpacked.rootfs, unpacked.config = dir, img
	}
	return unpacked.rootfs, unpacked.config
}

// ownAddressOverTCP is the dig option for a question whose answer names the
// address the query came in on (ns.dns and the apex NS glue): over TCP,
// since on the wildcard UDP socket of a Corefile without bind CoreDNS does
// not know that address.
func ownAddressOverTCP(tc contract.Case) []string {
	if strings.Contains(fmt.Sprint(tc.Want), "127.0.0.1") {
		return []string{"+tcp"}
	}
	return nil
}

// expectIn asks the pod's DNS server on port 53.
func expectIn(t *testing.T, pod *sandbox.Pod, tc contract.Case, extra ...string) {
	t.Helper()
	r, err := pod.Dig(tc.Name, tc.Type, extra...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.Want.Check(r.Msg(), defaultTTL); err != nil {
		t.Errorf("%s %s:\n%v\n%s", tc.Name, tc.Type, err, r)
	}
}

// serviceAccountToken waits until the ServiceAccount may do what rules
// grant (RBAC's caches follow watches) and returns a token of it, from the
// TokenRequest API, as the kubelet mounts one.
func serviceAccountToken(t *testing.T, e *harness.Env, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	sa := fmt.Sprintf("system:serviceaccount:%s:%s", ns, name)
	harness.Eventually(t, 30*time.Second, func() error {
		for _, r := range rules {
			attrs := &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			review, err := e.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, ResourceAttributes: attrs}}, metav1.CreateOptions{})
			if err != nil || !review.Status.Allowed {
				return fmt.Errorf("%s may not %s %s: %v", sa, attrs.Verb, attrs.Resource, err)
			}
		}
		return nil
	})
	tok, err := e.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

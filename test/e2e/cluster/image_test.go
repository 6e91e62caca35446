package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// imageNS is TestImageUnderKubelet's namespace, deleted when it ends.
const imageNS = "image-check"

// imageCorefile needs no API access: CoreDNS answers whoami on 53 and
// serves the probes of deploy/deployment.yaml (health on 8080, ready on
// 8181; the test checks the template's ports against these).
const imageCorefile = ".:53 {\n    whoami\n    health :8080\n    ready :8181\n}\n"

// TestImageUnderKubelet runs the project's image as pods of
// deploy/deployment.yaml's template on the cluster's kubelet and containerd
// 1.6 (runc): the container's securityContext as it is, no ServiceAccount
// token, a Corefile that needs no API access. What happens:
//   - with net.ipv4.ip_unprivileged_port_start=0 in the pod (a safe sysctl;
//     containerd 2.x's CRI default): CoreDNS binds 53, the pod becomes Ready
//     and answers;
//   - without it (containerd 1.x's default, this cluster's): exactly the
//     same, thanks to the file capability cap_net_bind_service=+ep of
//     /coredns, which no_new_privs lets stand because NET_BIND_SERVICE is
//     already in the permitted set the runtime gives the process;
//   - without `add: [NET_BIND_SERVICE]` (and without the sysctl): CoreDNS
//     never runs; the kernel refuses to exec a file whose +ep capability
//     the bounding set lacks, runc (1.1: after the container started) says
//     `exec /coredns: operation not permitted` and exits 1, and the kubelet
//     restarts the container in a crash loop; the pod never becomes Ready.
//
// For the two that run it checks, as the kernel sees the container's process
// (found through containerd), its IDs, no new privileges, only
// NET_BIND_SERVICE, a read-only root filesystem and the port floor of the
// pod's network namespace.
func TestImageUnderKubelet(t *testing.T) {
	ctx, cancel := harness.Context(10 * time.Minute)
	defer cancel()
	tmpl := deploymentTemplate(t)
	setupImageNamespace(ctx, t, tmpl)

	for _, tc := range []struct {
		name          string
		sysctl, noAdd bool // ip_unprivileged_port_start=0; no add: [NET_BIND_SERVICE]
		floor         string
	}{
		{name: "containerd2-sysctl", sysctl: true, floor: "0"},
		{name: "containerd1-no-sysctl", floor: "1024"},
		{name: "no-net-bind-service", noAdd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
			pod.Name, pod.Namespace = tc.name, imageNS
			if tc.sysctl {
				if pod.Spec.SecurityContext == nil {
					pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
				}
				pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls,
					corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"})
			}
			sc := pod.Spec.Containers[0].SecurityContext
			if tc.noAdd {
				sc.Capabilities.Add = nil
				// runc (1.1) fails the exec after the container started: the
				// error is the container's output, which the kubelet then
				// reports as the message of its terminated state.
				pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			}
			if _, err := env.Clientset.CoreV1().Pods(imageNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.noAdd {
				checkNeverStarts(ctx, t, pod.Name)
				return
			}
			running := waitPodReady(ctx, t, pod.Name)
			t.Logf("pod %s Ready, %s on %s", running.Name, running.Status.PodIP, running.Spec.NodeName)
			checkWhoami(ctx, t, running.Status.PodIP)
			pid := containerPID(ctx, t, running)
			checkProcess(t, pid, sc)
			floor, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(pid), "-n", "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start").CombinedOutput()
			t.Logf("ip_unprivileged_port_start in the pod's network namespace: %s", strings.TrimSpace(string(floor)))
			if err != nil || strings.TrimSpace(string(floor)) != tc.floor {
				t.Errorf("ip_unprivileged_port_start in the pod: %q, %v; want %s", floor, err, tc.floor)
			}
		})
	}
}

// deploymentTemplate is deploy/deployment.yaml's pod template, made to run
// in imageNS without API access: no ServiceAccount (its token is not
// mounted), the Corefile of imageCorefile, whose ports must be the probes'.
func deploymentTemplate(t *testing.T) corev1.PodTemplateSpec {
	t.Helper()
	data, err := os.ReadFile(env.Repo + "/deploy/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &dep); err != nil {
		t.Fatal(err)
	}
	tmpl := dep.Spec.Template
	c := tmpl.Spec.Containers[0]
	if c.Image != images["project"] {
		t.Fatalf("deploy/deployment.yaml's image %s, want %s (hack/cluster.sh images: project)", c.Image, images["project"])
	}
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || c.SecurityContext.RunAsUser == nil || c.SecurityContext.RunAsGroup == nil {
		t.Fatalf("deploy/deployment.yaml's container has no user, group or capabilities: %+v", c.SecurityContext)
	}
	for _, p := range []struct {
		probe  *corev1.Probe
		plugin string
	}{{c.ReadinessProbe, "ready"}, {c.LivenessProbe, "health"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || !strings.Contains(imageCorefile, "    "+p.plugin+" :"+p.probe.HTTPGet.Port.String()+"\n") {
			t.Fatalf("deploy/deployment.yaml's probe %+v: not the port of %s in the test's Corefile:\n%s", p.probe, p.plugin, imageCorefile)
		}
	}
	tmpl.Spec.ServiceAccountName = ""
	no := false
	tmpl.Spec.AutomountServiceAccountToken = &no
	return tmpl
}

// setupImageNamespace creates imageNS, left over from an earlier run or not,
// with the ConfigMap the template mounts, and deletes it when the test ends.
func setupImageNamespace(ctx context.Context, t *testing.T, tmpl corev1.PodTemplateSpec) {
	t.Helper()
	c := env.Clientset.CoreV1()
	deleteNamespace := func(t *testing.T) {
		t.Helper()
		ctx, cancel := harness.Context(3 * time.Minute)
		defer cancel()
		if err := c.Namespaces().Delete(ctx, imageNS, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		harness.Eventually(t, 2*time.Minute, func() error {
			if _, err := c.Namespaces().Get(ctx, imageNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s not gone yet: %v", imageNS, err)
			}
			return nil
		})
	}
	deleteNamespace(t)
	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: imageNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(t) })
	var cmName string
	for _, v := range tmpl.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" {
		t.Fatal("deploy/deployment.yaml's template mounts no ConfigMap")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: imageNS}, Data: map[string]string{"Corefile": imageCorefile}}
	if _, err := c.ConfigMaps(imageNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission refuses pods until the namespace's
	// default ServiceAccount exists.
	harness.Eventually(t, time.Minute, func() error {
		_, err := c.ServiceAccounts(imageNS).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// podReady says whether the kubelet reports the pod Ready.
func podReady(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// waitPodReady waits until the kubelet reports the pod Ready (its readiness
// probe passed) and returns it.
func waitPodReady(ctx context.Context, t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	harness.Eventually(t, 2*time.Minute, func() (err error) {
		if pod, err = env.Clientset.CoreV1().Pods(imageNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if !podReady(pod) || pod.Status.PodIP == "" || len(pod.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s not Ready: %+v %+v", name, pod.Status.Conditions, pod.Status.ContainerStatuses)
		}
		return nil
	})
	return pod
}

// checkNeverStarts waits until the kubelet reports that the pod's container
// ended with runc's "operation not permitted" (the exec of /coredns
// failed), checks that its log has nothing else (CoreDNS never ran), and
// that the pod is not Ready at any time.
func checkNeverStarts(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	pods := env.Clientset.CoreV1().Pods(imageNS)
	var found *corev1.ContainerStateTerminated
	seen := map[string]bool{}
	err := harness.Poll(60*time.Second, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if podReady(pod) {
			return harness.Permanent(fmt.Errorf("pod %s became Ready: %+v", name, pod.Status))
		}
		if len(pod.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s: no container status yet", name)
		}
		cs := pod.Status.ContainerStatuses[0]
		if cs.Ready {
			return harness.Permanent(fmt.Errorf("pod %s: the container is ready: %+v", name, cs))
		}
		for _, s := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
			var report string
			switch {
			case s.Waiting != nil:
				report = fmt.Sprintf("waiting, reason %s, message %q", s.Waiting.Reason, s.Waiting.Message)
			case s.Running != nil:
				report = "running"
			case s.Terminated != nil:
				x := s.Terminated
				report = fmt.Sprintf("terminated, exit code %d, reason %s, message %q", x.ExitCode, x.Reason, x.Message)
				if strings.Contains(x.Message, "operation not permitted") {
					found = x
				}
			}
			if report != "" && !seen[report] {
				seen[report] = true
				t.Logf("kubelet: container %s %s (restarts %d)", cs.Name, report, cs.RestartCount)
			}
		}
		if found == nil {
			return fmt.Errorf("pod %s: no terminated state says operation not permitted: %+v", name, cs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found.ExitCode == 0 {
		t.Errorf("the container ended with exit code 0: %+v", found)
	}
	// The container's whole output: runc's error, nothing of CoreDNS.
	if msg := strings.TrimSpace(found.Message); msg != "exec /coredns: operation not permitted" {
		t.Errorf("the container's output is not runc's error alone:\n%s", found.Message)
	}
	// Still not Ready a while later.
	time.Sleep(10 * time.Second)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if podReady(pod) || len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].Ready {
		t.Errorf("pod %s is Ready: %+v", name, pod.Status)
	}
	t.Logf("pod %s: not Ready, container restarts %d, phase %s", name, pod.Status.ContainerStatuses[0].RestartCount, pod.Status.Phase)
}

// checkWhoami asks the pod's CoreDNS, at its address, from the client pod:
// whoami answers with the client's address.
func checkWhoami(ctx context.Context, t *testing.T, podIP string) {
	t.Helper()
	client, err := env.Clientset.CoreV1().Pods("default").Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dig("whoami.example.", "A", "@"+podIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dig @%s whoami.example.: %s, additional %v", podIP, r.Rcode, r.Additional)
	if r.Rcode != "NOERROR" || !slices.ContainsFunc(r.Additional, func(rr dns.RR) bool {
		a, ok := rr.(*dns.A)
		return ok && a.A.String() == client.Status.PodIP
	}) {
		t.Errorf("whoami, want NOERROR with the client's address %s:\n%s", client.Status.PodIP, r)
	}
}

// containerPID finds the process of the pod's container in containerd,
// through its ID in the pod's status and ctr tasks ls.
func containerPID(ctx context.Context, t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	id, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok {
		t.Fatalf("container ID %q, want containerd://...", pod.Status.ContainerStatuses[0].ContainerID)
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", "/run/multicluster-cluster/containerd.sock", "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err != nil || f[2] != "RUNNING" {
				t.Fatalf("ctr tasks ls: %s", line)
			}
			t.Logf("container %s: task %s, pid %d", pod.Status.ContainerStatuses[0].Name, id[:12], pid)
			return pid
		}
	}
	t.Fatalf("ctr tasks ls has no task %s:\n%s", id, out)
	return 0
}

// checkProcess checks the securityContext sc, as the kernel sees the
// process pid: its IDs, no new privileges, only NET_BIND_SERVICE, a
// read-only root filesystem.
func checkProcess(t *testing.T, pid int, sc *corev1.SecurityContext) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := strconv.FormatInt(*sc.RunAsUser, 10), strconv.FormatInt(*sc.RunAsGroup, 10)
	want := map[string]string{
		"Uid": strings.Repeat(uid+"\t", 3) + uid, "Gid": strings.Repeat(gid+"\t", 3) + gid, "NoNewPrivs": "1",
		"CapEff": "0000000000000400", "CapPrm": "0000000000000400", "CapBnd": "0000000000000400", // NET_BIND_SERVICE
		"CapInh": "0000000000000000", "CapAmb": "0000000000000000",
	}
	var seen []string
	for line := range strings.Lines(string(status)) {
		if field, _, _ := strings.Cut(line, ":"); want[field] != "" {
			seen = append(seen, strings.TrimSpace(line))
		}
	}
	t.Logf("/proc/%d/status:\n%s", pid, strings.Join(seen, "\n"))
	for field, want := range want {
		if !strings.Contains(string(status), "\n"+field+":\t"+want+"\n") {
			t.Errorf("%s is not %q in /proc/%d/status:\n%s", field, want, pid, status)
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	root := 0
	for line := range strings.Lines(string(mountinfo)) {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			root++
			t.Logf("/proc/%d/mountinfo, the root: %s", pid, strings.TrimSpace(line))
			if !slices.Contains(strings.Split(f[5], ","), "ro") {
				t.Errorf("the root filesystem is not read-only: %s", line)
			}
		}
	}
	if root == 0 {
		t.Errorf("no root filesystem in /proc/%d/mountinfo:\n%s", pid, mountinfo)
	}
}

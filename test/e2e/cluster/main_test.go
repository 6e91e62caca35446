// Package cluster tests the plugin where its users run it: in a cluster's
// own CoreDNS, asked by pods through the cluster DNS Service with the
// resolv.conf the kubelet writes. The cluster is hack/cluster.sh's one node
// of upstream parts; hack/test.sh starts it, passes its admin kubeconfig as
// E2E_CLUSTER_KUBECONFIG, and takes it down after.
//
// The tests share the cluster and change kube-system's CoreDNS: they run
// one after the other, never in parallel.
package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

var (
	env        *harness.Env
	kubeconfig string
	clusterDir string
	// images are the names hack/cluster.sh images lists: project, stock, client.
	images = map[string]string{}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	kubeconfig = os.Getenv("E2E_CLUSTER_KUBECONFIG")
	if kubeconfig == "" {
		msg := "cluster: E2E_CLUSTER_KUBECONFIG is not set: start the one-node cluster with hack/cluster.sh up (it prints it)"
		if os.Getenv("MULTICLUSTER_NO_SKIP") != "" {
			fmt.Fprintln(os.Stderr, msg+" (MULTICLUSTER_NO_SKIP is set: nothing may be skipped)")
			return 1
		}
		fmt.Println(msg + "; nothing run")
		return 0
	}
	clusterDir = filepath.Dir(kubeconfig)
	var err error
	if env, err = harness.Connect(kubeconfig, filepath.Join(clusterDir, "audit.log")); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	out, err := exec.Command(filepath.Join(env.Repo, "hack", "cluster.sh"), "images").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: hack/cluster.sh images:", err)
		return 1
	}
	for line := range strings.Lines(string(out)) {
		if role, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			images[role] = name
		}
	}
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	return m.Run()
}

// setup installs the ServiceImport CRD and the objects of testdata/, and
// starts the client pod.
func setup() error {
	ctx, cancel := harness.Context(3 * time.Minute)
	defer cancel()
	if out, err := kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.Repo, "deploy", "crds")); err != nil {
		return fmt.Errorf("the CRDs: %v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "--for=condition=Established", "crd/serviceimports.multicluster.x-k8s.io", "--timeout=60s"); err != nil {
		return fmt.Errorf("the CRDs: %v\n%s", err, out)
	}
	objs, err := contract.ReadObjects(filepath.Join(env.Repo, "testdata"))
	if err != nil {
		return err
	}
	if err := env.ApplyAll(ctx, objs); err != nil {
		return fmt.Errorf("testdata: %w", err)
	}
	return startPod(ctx, "client", "")
}

// startPod starts a pod of the client image in default, running script
// (busybox sh) or sleeping, and waits until it is Ready.
func startPod(ctx context.Context, name, script string) error {
	grace := int64(1)
	c := corev1.Container{Name: name, Image: images["client"]}
	if script != "" {
		c.Command = []string{"/bin/sh", "-c", script}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: &grace},
	}
	_, err := env.Clientset.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	if err != nil {
		return err
	}
	if out, err := kubectl(ctx, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s"); err != nil {
		return fmt.Errorf("pod %s: %v\n%s", name, err, out)
	}
	return nil
}

// kubectl runs kubectl as the cluster's admin.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.KubectlPath(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// inClient runs a command in the client pod; its output, and how it ended.
func inClient(args ...string) (string, error) {
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	return kubectl(ctx, append([]string{"exec", "-n", "default", "client", "--"}, args...)...)
}

// dig asks the cluster DNS Service from the client pod, as a user checks
// it: dig with the pod's resolv.conf (so through 10.96.0.10), one try of
// two seconds; extra options come before the name.
func dig(name, qtype string, extra ...string) (*harness.DigResult, error) {
	args := append([]string{"dig", "+time=2", "+tries=1", "+noall", "+comments", "+answer", "+authority", "+additional"}, extra...)
	args = append(args, name, qtype)
	out, err := inClient(args...)
	return harness.ParseDig("kubectl exec client -- "+strings.Join(args, " "), out, err)
}

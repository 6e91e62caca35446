package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
	"github.com/clustersetdns/multicluster/test/e2e/sandbox"
)

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

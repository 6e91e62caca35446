//go:build rotation

// The rotation test takes more than ten minutes, so hack/test.sh leaves it
// out (it is built only with -tags rotation). Run it on a cluster whose API
// server extends no projected token:
//
//	SHORT_TOKENS=1 hack/cluster.sh up
//	cd test/e2e && E2E_CLUSTER_KUBECONFIG=$PWD/../../.cache/cluster/admin.kubeconfig \
//	    go test -tags rotation -run TestTokenRotation -v -timeout 40m ./cluster/

package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// tokenTTL is the life of the tokens CoreDNS's pods ask for: the shortest
// a projected token may have.
const tokenTTL = 10 * time.Minute

// TestTokenRotation runs the plugin, installed in place, on the projected
// ServiceAccount token the kubelet mounts and refreshes: CoreDNS's pods ask
// for ten-minute tokens, which kube-apiserver does not extend
// (hack/cluster.sh with SHORT_TOKENS=1). Once the first token has expired
// and every pod has opened its ServiceImport watches again, a new
// ServiceImport answers within 2 s at every pod, and the API server refused
// none of CoreDNS's requests.
func TestTokenRotation(t *testing.T) {
	ctx, cancel := harness.Context(tokenTTL + 30*time.Minute)
	defer cancel()
	runJob(ctx, t, "install.yaml", installJob)
	everyPodAnswers(ctx, t, true)

	// The token the ServiceAccount admission mounts, asked for tokenTTL.
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"automountServiceAccountToken":false,
"volumes":[{"name":"short-token","projected":{"sources":[
 {"serviceAccountToken":{"path":"token","expirationSeconds":%d}},
 {"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},
 {"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"fieldPath":"metadata.namespace"}}]}}]}}],
"containers":[{"name":"coredns","volumeMounts":[{"name":"short-token","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}]}]}}}}`,
		int(tokenTTL.Seconds()))
	start := time.Now()
	if out, err := kubectl(ctx, "-n", ns, "patch", "deployment", coredns, "--type", "strategic", "-p", patch); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+coredns, "--timeout=5m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	everyPodAnswers(ctx, t, true)
	ttl := tokenTTL

	// The kubelet's token requests for CoreDNS's ServiceAccount: the first
	// one after install is the token the new pods start with.
	tokens := func() []auditv1.Event {
		evs, err := env.AuditEvents("system:node:node", start)
		if err != nil {
			t.Fatal(err)
		}
		var out []auditv1.Event
		for _, ev := range evs {
			if o := ev.ObjectRef; ev.Verb == "create" && o != nil && o.Resource == "serviceaccounts" && o.Subresource == "token" && o.Name == coredns {
				out = append(out, ev)
			}
		}
		return out
	}
	first := tokens()
	if len(first) == 0 {
		t.Fatal("the kubelet asked no token for CoreDNS's pods")
	}
	expired := first[0].StageTimestamp.Add(ttl)
	t.Logf("first token %s, expires %s", first[0].StageTimestamp.Format(time.TimeOnly), expired.Format(time.TimeOnly))
	time.Sleep(time.Until(expired)) // what is tested is the passing of time

	// client-go's watches ask to end within 5 to 10 minutes: wait until
	// every CoreDNS pod has opened its ServiceImport watches again since the
	// first token expired, each on a token the kubelet rotated in.
	pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 11*time.Minute, func() error {
		evs, err := env.AuditEvents("system:serviceaccount:kube-system:coredns", expired)
		if err != nil {
			return err
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
				continue
			}
			if !slices.ContainsFunc(evs, func(ev auditv1.Event) bool {
				return ev.Verb == "watch" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "serviceimports" &&
					slices.Contains(ev.SourceIPs, pod.Status.PodIP) && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 200
			}) {
				return fmt.Errorf("pod %s has not watched ServiceImports again since %s", pod.Name, expired.Format(time.TimeOnly))
			}
		}
		return nil
	})
	t.Logf("every CoreDNS pod watches ServiceImports again, since %s", time.Now().Format(time.TimeOnly))

	all := tokens()
	t.Logf("the kubelet asked %d tokens for CoreDNS's pods since install", len(all))
	if len(all) <= len(first) {
		t.Errorf("no token was asked after the first: no rotation")
	}

	// A ServiceImport written now answers within 2 s at every pod.
	if _, err = env.ApplyYAML(ctx, `apiVersion: v1
kind: Namespace
metadata: {name: rotated}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: late, namespace: rotated}
spec:
  type: ClusterSetIP
  ips: [10.43.0.1]
  ports: [{name: http, protocol: TCP, port: 80}]
`); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		harness.Eventually(t, 2*time.Second, func() error {
			r, err := dig("late.rotated.svc.clusterset.local.", "A", "@"+pod.Status.PodIP)
			if err == nil && !strings.Contains(r.Output, "10.43.0.1") {
				err = fmt.Errorf("not yet:\n%s", r)
			}
			return err
		})
	}
	t.Logf("the ServiceImport written %s after the first token expired answered at every pod within %.2fs",
		written.Sub(expired).Round(time.Second), time.Since(written).Seconds())

	// No request of CoreDNS's was refused (401, 403), and it watched again
	// after expiry. (A 404 is a resource this cluster does not serve, such
	// as ClusterProperty here.)
	evs, err := env.AuditEvents("system:serviceaccount:kube-system:coredns", expired)
	if err != nil {
		t.Fatal(err)
	}
	watches := 0
	for _, ev := range evs {
		if c := ev.ResponseStatus; c != nil && (c.Code == 401 || c.Code == 403) {
			t.Errorf("refused after expiry: %s %s: %d", ev.Verb, ev.RequestURI, c.Code)
		}
		if ev.Verb == "watch" {
			watches++
		}
	}
	t.Logf("after the first token expired, CoreDNS opened %d watches, all accepted", watches)
	if watches == 0 {
		t.Error("no watch was opened after the first token expired: the test proves nothing")
	}
	// A request whose token fails authentication is audited with no user.
	unauth, err := env.AuditEvents("", start)
	if err != nil {
		t.Fatal(err)
	}
	if len(unauth) > 0 {
		t.Errorf("%d requests failed authentication since install, the first %s %s from %v", len(unauth), unauth[0].Verb, unauth[0].RequestURI, unauth[0].SourceIPs)
	}
}

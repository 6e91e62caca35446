package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const (
	deployNS   = "kube-system"
	deployName = "coredns-multicluster"
	crdName    = "serviceimports.multicluster.x-k8s.io"
)

// deployObjects reads every manifest of deploy/ and deploy/crds/, in
// creation order, and fails unless the objects an install needs are there.
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, dir := range []string{"deploy", filepath.Join("deploy", "crds")} {
		o, err := contract.ReadObjects(filepath.Join(env.Repo, dir))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	contract.SortForCreation(objs)
	var have []string
	for _, o := range objs {
		have = append(have, contract.Describe(o))
	}
	for _, want := range []string{
		"CustomResourceDefinition " + crdName,
		"ServiceAccount " + deployNS + "/" + deployName,
		"ClusterRole " + deployName,
		"ClusterRoleBinding " + deployName,
		"ConfigMap " + deployNS + "/" + deployName,
		"Deployment " + deployNS + "/" + deployName,
		"Service " + deployNS + "/" + deployName,
	} {
		if !slices.Contains(have, want) {
			t.Errorf("deploy/ has no %s; it has %q", want, have)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return objs
}

// find converts the one object of that kind into T, failing on unknown
// fields.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
				t.Fatalf("%s into %T: %v", contract.Describe(o), out, err)
			}
			return out
		}
	}
	t.Fatalf("no %s among the objects", kind)
	return nil
}

// TestDeployManifestsDryRun sends every object of deploy/ to the real API
// server. The CRD and the RBAC objects are created for real when absent (and
// removed again afterwards); everything else, and whatever exists already, goes
// through a server-side dry run: a create, or a full update of the stored
// object. Field validation is strict, so an unknown or duplicated field fails.
func TestDeployManifestsDryRun(t *testing.T) {
	objs := deployObjects(t)
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()

	// kube-apiserver creates kube-system itself; make sure of it.
	if _, err := env.Clientset.CoreV1().Namespaces().Get(ctx, deployNS, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNS}}
		if _, err := env.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}

	dryRunAll(t, objs, createForReal)

	// And the failure this test exists to catch, so that a pass means something.
	var typo *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			typo = o.DeepCopy()
		}
	}
	if err := unstructured.SetNestedField(typo.Object, int64(2), "spec", "replicaz"); err != nil {
		t.Fatal(err)
	}
	ri, err := env.Resource(typo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Create(ctx, typo, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "replicaz") {
		t.Errorf("dry-run create of a Deployment with spec.replicaz: %v, want BadRequest naming the field", err)
	}
}

// createForReal: the CRD and RBAC objects are installed for real when absent.
func createForReal(o *unstructured.Unstructured) bool {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		schema.GroupKind{Kind: "ServiceAccount"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:
		return true
	}
	return false
}

// TestDeployWiring checks that the manifests fit together: the Deployment
// runs as the ServiceAccount the ClusterRoleBinding binds, mounts the
// ConfigMap where -conf looks, probes the ports the Corefile opens, and the
// Service selects its pods and reaches their named ports. It also pins the
// settings operators rely on.
func TestDeployWiring(t *testing.T) {
	objs := deployObjects(t)
	d := find[appsv1.Deployment](t, objs, "Deployment")
	cm := find[corev1.ConfigMap](t, objs, "ConfigMap")
	svc := find[corev1.Service](t, objs, "Service")
	sa := find[corev1.ServiceAccount](t, objs, "ServiceAccount")
	binding := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	checkDeploySpread(t, d, objs)
	if pod.ServiceAccountName != sa.Name || d.Namespace != sa.Namespace {
		t.Errorf("the pods run as %s/%s, deploy/rbac.yaml creates %s/%s", d.Namespace, pod.ServiceAccountName, sa.Namespace, sa.Name)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("the ClusterRoleBinding binds %+v, want only ServiceAccount %s/%s", binding.Subjects, sa.Namespace, sa.Name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := "ghcr.io/clustersetdns/coredns-multicluster:" + chartAppVersion(t); c.Image != want || imageName != want {
		t.Errorf("image %q, and the image built as %q: want both the documented placeholder %s (the chart's appVersion)", c.Image, imageName, want)
	}
	checkDeploySecurity(t, c)
	checkCorefileMounted(t, pod, c, cm)
	core := parseCorefile(t, cm.Data["Corefile"])
	containerPort := checkDeployPorts(t, c, core)
	checkDeployService(t, svc, d, containerPort)
}

// checkDeploySpread checks the Deployment at scale: spread over nodes and
// zones, one eviction at a time, both selecting the Deployment's pods.
func checkDeploySpread(t *testing.T, d *appsv1.Deployment, objs []*unstructured.Unstructured) {
	t.Helper()
	pod := d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)
	var keys []string
	for _, c := range pod.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(podLabels) || c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 {
			t.Errorf("topology spread on %s: selector %v (%v), %s, skew %d; want the pods' labels, ScheduleAnyway, skew 1",
				c.TopologyKey, c.LabelSelector, err, c.WhenUnsatisfiable, c.MaxSkew)
		}
	}
	if !slices.Equal(keys, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}) {
		t.Errorf("topology spread over %v, want nodes and zones", keys)
	}
	pdb := find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) || pdb.Namespace != d.Namespace ||
		pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %s/%s selects %v, maxUnavailable %v; want the Deployment's pods, 1", pdb.Namespace, pdb.Name,
			pdb.Spec.Selector, pdb.Spec.MaxUnavailable)
	}
}

// checkDeploySecurity checks the container's security: what the brief and
// Pod Security "restricted" ask for, and resources.
func checkDeploySecurity(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot,
		sc.RunAsUser == nil || *sc.RunAsUser != 65532,
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}),
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("securityContext %s", mustJSON(sc))
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %s, want CPU and memory requests and a memory limit", mustJSON(c.Resources))
	}
}

// checkCorefileMounted checks that the Corefile -conf reads is in the
// ConfigMap, mounted where -conf reads it.
func checkCorefileMounted(t *testing.T, pod corev1.PodSpec, c corev1.Container, cm *corev1.ConfigMap) {
	t.Helper()
	conf := ""
	if i := slices.Index(c.Args, "-conf"); i >= 0 && i+1 < len(c.Args) {
		conf = c.Args[i+1]
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(conf) || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
				continue
			}
			for _, item := range v.ConfigMap.Items {
				mounted = mounted || (item.Key == "Corefile" && item.Path == path.Base(conf))
			}
		}
	}
	if !mounted {
		t.Errorf("-conf %q is not the Corefile key of ConfigMap %s mounted without subPath (reload needs the kubelet's updates)", conf, cm.Name)
	}
}

// checkDeployPorts checks the probes and ports against the Corefile, and
// returns the container's ports by name.
func checkDeployPorts(t *testing.T, c corev1.Container, core corefile) map[string]corev1.ContainerPort {
	t.Helper()
	probe := func(name string, p *corev1.Probe, urlPath string, port int) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != urlPath || p.HTTPGet.Port != intstr.FromInt32(int32(port)) {
			t.Errorf("%s %s, want HTTP GET %s on %d, where the Corefile serves it", name, mustJSON(p), urlPath, port)
		}
	}
	probe("readinessProbe", c.ReadinessProbe, "/ready", core.ports["ready"])
	probe("livenessProbe", c.LivenessProbe, "/health", core.ports["health"])
	if core.ports["ready"] != 8181 || core.ports["health"] != 8080 || core.ports["prometheus"] != 9153 || core.ports["server"] != 53 {
		t.Errorf("Corefile ports %v, want server 53, health 8080, ready 8181, prometheus 9153", core.ports)
	}
	containerPort := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		containerPort[p.Name] = p
	}
	for name, want := range map[string]corev1.ContainerPort{
		"dns":     {ContainerPort: int32(core.ports["server"]), Protocol: corev1.ProtocolUDP},
		"dns-tcp": {ContainerPort: int32(core.ports["server"]), Protocol: corev1.ProtocolTCP},
		"metrics": {ContainerPort: int32(core.ports["prometheus"]), Protocol: corev1.ProtocolTCP},
	} {
		if got := containerPort[name]; got.ContainerPort != want.ContainerPort || got.Protocol != want.Protocol {
			t.Errorf("container port %q is %d/%s, want %d/%s", name, got.ContainerPort, got.Protocol, want.ContainerPort, want.Protocol)
		}
	}
	return containerPort
}

// checkDeployService checks the Service: ClusterIP, selecting the pods,
// 53/UDP, 53/TCP and 9153, each targeting a container port.
func checkDeployService(t *testing.T, svc *corev1.Service, d *appsv1.Deployment, containerPort map[string]corev1.ContainerPort) {
	t.Helper()
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Namespace != d.Namespace {
		t.Errorf("Service %s/%s of type %s, want ClusterIP in %s", svc.Namespace, svc.Name, svc.Spec.Type, d.Namespace)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, the pods are labelled %v", k, v, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("the Service selects nothing")
	}
	var got []string
	for _, p := range svc.Spec.Ports {
		target := p.TargetPort.StrVal
		if cp, ok := containerPort[target]; !ok || cp.Protocol != p.Protocol {
			t.Errorf("Service port %s targets %q, no %s container port of that name", p.Name, p.TargetPort.String(), p.Protocol)
		}
		got = append(got, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
	}
	slices.Sort(got)
	if want := []string{"53/TCP", "53/UDP", "9153/TCP"}; !slices.Equal(got, want) {
		t.Errorf("Service ports %q, want %q", got, want)
	}
}

// TestDeployPodSecurity: the Deployment's pod passes the Pod Security
// "restricted" profile, enforced by the real API server's admission.
func TestDeployPodSecurity(t *testing.T) {
	objs := deployObjects(t)
	d := find[appsv1.Deployment](t, objs, "Deployment")
	const ns = "deploy-restricted"
	apply(t, `
apiVersion: v1
kind: Namespace
metadata:
  name: `+ns+`
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: `+d.Spec.Template.Spec.ServiceAccountName+`, namespace: `+ns+`}
`)
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	pods := env.Clientset.CoreV1().Pods(ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns, Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.PriorityClassName = "" // system-cluster-critical is for kube-system only
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := pods.Create(ctx, pod, dryRun); err != nil {
		t.Errorf("the Deployment's pod in a namespace enforcing restricted: %v", err)
	}
	// The control: admission does enforce the profile here.
	loose := pod.DeepCopy()
	loose.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	if _, err := pods.Create(ctx, loose, dryRun); !apierrors.IsForbidden(err) {
		t.Errorf("a pod adding NET_ADMIN: %v, want Forbidden by Pod Security", err)
	}
}

// corefile is what the tests need to know of deploy/configmap.yaml's Corefile.
type corefile struct {
	text string
	// ports: "server" (the block's), "health", "ready", "prometheus".
	ports map[string]int
}

// parseCorefile reads the ports of the one server block and its HTTP plugins.
func parseCorefile(t *testing.T, text string) corefile {
	t.Helper()
	c := corefile{text: text, ports: map[string]int{}}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[1] == "{" && strings.HasPrefix(f[0], "clusterset.local:"):
			c.ports["server"], _ = strconv.Atoi(strings.TrimPrefix(f[0], "clusterset.local:"))
		case len(f) >= 2 && slices.Contains([]string{"health", "ready", "prometheus"}, f[0]):
			if _, p, ok := strings.Cut(f[1], ":"); ok {
				c.ports[f[0]], _ = strconv.Atoi(p)
			}
		}
	}
	for _, k := range []string{"server", "health", "ready", "prometheus"} {
		if c.ports[k] == 0 {
			t.Fatalf("the Corefile has no %s port:\n%s", k, text)
		}
	}
	return c
}

// local rewrites the Corefile to run here: every listener on 127.0.0.1 and
// a free port, multicluster reading the API server with kubeconfig.
func (c corefile) local(dnsPort int, httpPorts map[string]int, kubeconfig string) string {
	var out strings.Builder
	for line := range strings.Lines(c.text) {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[1] == "{" && strings.HasPrefix(f[0], "clusterset.local:"):
			fmt.Fprintf(&out, "%sclusterset.local:%d {\n%s    bind 127.0.0.1\n", indent, dnsPort, indent)
		case len(f) >= 2 && httpPorts[f[0]] != 0:
			f[1] = "127.0.0.1:" + strconv.Itoa(httpPorts[f[0]])
			fmt.Fprintf(&out, "%s%s\n", indent, strings.Join(f, " "))
		case len(f) >= 1 && f[0] == "multicluster":
			if f[len(f)-1] != "{" {
				fmt.Fprintf(&out, "%s%s {\n%s    kubeconfig %s\n%s}\n", indent, strings.Join(f, " "), indent, kubeconfig, indent)
			} else {
				fmt.Fprintf(&out, "%s%s    kubeconfig %s\n", line, indent, kubeconfig)
			}
		default:
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestDeployCorefile runs CoreDNS with the Corefile of deploy/configmap.yaml
// (listeners moved to 127.0.0.1, a kubeconfig instead of the in-cluster
// account): it starts, becomes ready and healthy on the probes' paths,
// exports metrics, answers the zone and refuses everything else.
func TestDeployCorefile(t *testing.T) {
	objs := deployObjects(t)
	cm := find[corev1.ConfigMap](t, objs, "ConfigMap")
	core := parseCorefile(t, cm.Data["Corefile"])
	httpPorts := map[string]int{}
	for _, k := range []string{"health", "ready", "prometheus"} {
		p, err := harness.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		httpPorts[k] = p
	}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string { return core.local(port, httpPorts, plugin.Kubeconfig) },
	})

	get := func(k, path string) (int, string, error) {
		cl := &http.Client{Timeout: 2 * time.Second}
		resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d%s", httpPorts[k], path))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	for _, p := range []struct{ plugin, path string }{{"ready", "/ready"}, {"health", "/health"}} {
		harness.Eventually(t, syncWithin, func() error {
			code, body, err := get(p.plugin, p.path)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("%s: %d %s", p.path, code, body)
			}
			return err
		})
	}

	expect(t, c, defaultTTL, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	expect(t, c, defaultTTL, "dns-version."+apex, "TXT", want{Answer: []string{`dns-version.clusterset.local. txt "1.0.0"`}})
	// A dedicated server: nothing outside the zone, and no recursion.
	if r := dig(t, c, "kubernetes.default.svc.cluster.local.", "A"); r.Rcode != "REFUSED" {
		t.Errorf("a name outside clusterset.local: %s, want REFUSED\n%s", r.Rcode, r)
	}

	code, body, err := get("prometheus", "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, m := range []string{"coredns_multicluster_responses_total", "coredns_multicluster_serviceimports", "coredns_dns_requests_total"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
}

// TestDeployServiceImportSchema: the CRD of deploy/crds/ (mcs-api's v1alpha1
// and v1beta1, v1beta1 the storage version, plus our v1alpha2, served and not
// storage, conversion None) stores ServiceImports of the spec shape written
// through v1beta1 without losing a field and serves them through v1alpha1;
// it refuses malformed v1alpha2 objects, each for the reason meant, though
// v1alpha2 is not the storage version; and it drops the root fields of an
// object written through v1alpha2. The CRD of deploy/crds-v1alpha2-storage/,
// on a control plane of its own, stores that object whole.
func TestDeployServiceImportSchema(t *testing.T) {
	const ns = "deploy-schema"
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
	ctx, cancel := harness.Context(2 * time.Minute)
	defer cancel()
	s := schemaVersions(env, ns)
	s.checkSpecShape(ctx, t)
	s.checkRefusals(ctx, t)
	s.checkRootOnSpecStorage(ctx, t)
	// With v1alpha2 the storage version, the same object reads back whole
	// (the third port's protocol defaulted).
	t.Run("v1alpha2 storage", func(t *testing.T) { checkV1alpha2Storage(ctx, t, ns) })
}

// schemaVersion is a namespace's ServiceImports in each version.
type schemaVersion struct {
	ns                          string
	v1alpha2, v1beta1, v1alpha1 dynamic.ResourceInterface
}

func schemaVersions(e *harness.Env, ns string) schemaVersion {
	version := func(v string) dynamic.ResourceInterface {
		return e.Dynamic.Resource(cache.ServiceImports(v)).Namespace(ns)
	}
	return schemaVersion{ns: ns, v1alpha2: version("v1alpha2"), v1beta1: version("v1beta1"), v1alpha1: version("v1alpha1")}
}

// specShapeImport is the spec shape, every field of mcs-api v0.5.2's schema,
// as MCS controllers write it: through v1beta1, the storage version.
func specShapeImport(t *testing.T, ns string) *unstructured.Unstructured {
	return decode(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: spec-shape, namespace: `+ns+`}
spec:
  type: ClusterSetIP
  ips: [10.42.7.2, "fd00:42::7:2"]
  ipFamilies: [IPv4, IPv6]
  ports:
  - {name: http, protocol: TCP, appProtocol: http, port: 80}
  - {name: dns, protocol: UDP, port: 53}
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 300}}
  internalTrafficPolicy: Cluster
  trafficDistribution: PreferClose
status:
  clusters:
  - cluster: west
`)
}

// long253 is a cluster name of the longest length a subdomain may have.
var long253 = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)

// rootShapeImport is a good v1alpha2 ServiceImport of the proposed shape.
func rootShapeImport(t *testing.T, ns string) *unstructured.Unstructured {
	return decode(t, `
apiVersion: multicluster.x-k8s.io/v1alpha2
kind: ServiceImport
metadata: {name: good, namespace: `+ns+`}
spec: {}
type: ClusterSetIP
ips: [10.42.7.1, "fd00:42::7:1"]
ports:
- {name: http, protocol: TCP, appProtocol: http, port: 80, targetPort: 8080}
- {name: dns, protocol: UDP, port: 53, targetPort: dns}
- {port: 9000}
sessionAffinity: ClientIP
sessionAffinityConfig: {clientIP: {timeoutSeconds: 300}}
clusters:
- cluster: west
- cluster: east.prod
- cluster: `+long253+`
`)
}

var rootFields = []string{"spec", "type", "ips", "ports", "sessionAffinity", "sessionAffinityConfig", "clusters"}

// checkSpecShape writes the spec shape through v1beta1 and reads it through
// every version.
func (s schemaVersion) checkSpecShape(ctx context.Context, t *testing.T) {
	v1alpha2, v1beta1, v1alpha1 := s.v1alpha2, s.v1beta1, s.v1alpha1
	spec := func() *unstructured.Unstructured { return specShapeImport(t, s.ns) }
	if _, err := v1beta1.Create(ctx, spec(), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("a v1beta1 ServiceImport: %v", err)
	}
	t.Cleanup(func() { deleteQuietly(v1beta1, "spec-shape") })
	// Read back whole through both versions of the spec shape. status is a
	// subresource: a create drops it (controllers write it with
	// UpdateStatus; the plugin does not read it).
	for _, ri := range []struct {
		name string
		ri   dynamic.ResourceInterface
	}{{"v1beta1", v1beta1}, {"v1alpha1", v1alpha1}} {
		back, err := ri.ri.Get(ctx, "spec-shape", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(back.Object["spec"]), mustJSON(spec().Object["spec"]); g != w {
			t.Errorf("v1beta1 object's spec read through %s as %s, want %s", ri.name, g, w)
		}
		if _, has := back.Object["status"]; has {
			t.Errorf("v1beta1 object read through %s has status %s, want none (a subresource)", ri.name, mustJSON(back.Object["status"]))
		}
	}
	// Through v1alpha2 the same object is there, but its fields are not: the
	// root shape has no type or ips, and its spec has no fields.
	if back, err := v1alpha2.Get(ctx, "spec-shape", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if g := mustJSON(besideMeta(back.Object)); g != `{"spec":{}}` {
		t.Errorf("v1beta1 object read through v1alpha2 as %s, want {\"spec\":{}}", g)
	}
	// Each spec-shape version validates against its own schema.
	for _, ri := range []struct {
		name string
		ri   dynamic.ResourceInterface
	}{{"v1beta1", v1beta1}, {"v1alpha1", v1alpha1}} {
		noType := spec()
		noType.SetAPIVersion("multicluster.x-k8s.io/" + ri.name)
		noType.SetName("spec-no-type")
		unstructured.RemoveNestedField(noType.Object, "spec", "type")
		if _, err := ri.ri.Create(ctx, noType, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.type") {
			t.Errorf("a %s ServiceImport without spec.type: %v, want Invalid naming spec.type", ri.name, err)
		}
	}

}

// checkRefusals: a v1alpha2 object is refused for each field that breaks its
// schema.
func (s schemaVersion) checkRefusals(ctx context.Context, t *testing.T) {
	v1alpha2 := s.v1alpha2
	good := func() *unstructured.Unstructured { return rootShapeImport(t, s.ns) }
	// Refused, each for its own reason: the field named in the error. The API
	// server validates a request against the schema of the version it is
	// made in, storage version or not.
	for _, tc := range []struct {
		name   string
		mutate func(o map[string]any)
		field  string // in the status causes
	}{
		{"ips: not an IP", set([]any{"10.42.7.x"}, "ips"), "ips[0]"},
		{"ips: a hostname", set([]any{"web.example"}, "ips"), "ips[0]"},
		{"ips: two IPv4", set([]any{"10.42.7.1", "10.42.7.2"}, "ips"), "ips"},
		{"ips: two IPv6", set([]any{"fd00::1", "fd00::2"}, "ips"), "ips"},
		{"ips: three", set([]any{"10.42.7.1", "fd00::1", "10.42.7.3"}, "ips"), "ips"},
		{"type: missing", func(o map[string]any) { delete(o, "type") }, "type"},
		{"type: unknown", set("LoadBalancer", "type"), "type"},
		{"cluster: upper case", set([]any{map[string]any{"cluster": "West"}}, "clusters"), "clusters[0].cluster"},
		{"cluster: underscore", set([]any{map[string]any{"cluster": "west_1"}}, "clusters"), "clusters[0].cluster"},
		{"cluster: 254 characters", set([]any{map[string]any{"cluster": long253 + "d"}}, "clusters"), "clusters[0].cluster"},
		{"cluster: twice", set([]any{map[string]any{"cluster": "west"}, map[string]any{"cluster": "west"}}, "clusters"), "clusters[1]"},
		{"port: 0", set([]any{map[string]any{"name": "http", "port": int64(0)}}, "ports"), "ports[0].port"},
		{"port: 65536", set([]any{map[string]any{"name": "http", "port": int64(65536)}}, "ports"), "ports[0].port"},
		{"port: missing", set([]any{map[string]any{"name": "http"}}, "ports"), "ports[0].port"},
		{"port: protocol HTTP", set([]any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}, "ports"), "ports[0].protocol"},
		{"port: name of 64 characters", set([]any{map[string]any{"name": strings.Repeat("p", 64), "port": int64(80)}}, "ports"), "ports[0].name"},
		{"sessionAffinity: unknown", set("Sticky", "sessionAffinity"), "sessionAffinity"},
		{"timeoutSeconds: 0", set(map[string]any{"clientIP": map[string]any{"timeoutSeconds": int64(0)}}, "sessionAffinityConfig"), "sessionAffinityConfig.clientIP.timeoutSeconds"},
		{"timeoutSeconds: a day and a second", set(map[string]any{"clientIP": map[string]any{"timeoutSeconds": int64(86401)}}, "sessionAffinityConfig"), "sessionAffinityConfig.clientIP.timeoutSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			o.SetName("bad")
			tc.mutate(o.Object)
			_, err := v1alpha2.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("created (dry run): %v, want Invalid", err)
			}
			var status *apierrors.StatusError
			var fields []string
			if errors.As(err, &status) && status.ErrStatus.Details != nil {
				for _, c := range status.ErrStatus.Details.Causes {
					fields = append(fields, c.Field)
				}
			}
			if !slices.Contains(fields, tc.field) {
				t.Errorf("refused for %q, want %q: %v", fields, tc.field, err)
			}
			t.Logf("refused: %v", err)
		})
	}

}

// checkRootOnSpecStorage: on the spec-shape storage version, the root
// fields of a v1alpha2 object are pruned.
func (s schemaVersion) checkRootOnSpecStorage(ctx context.Context, t *testing.T) {
	v1alpha2, v1beta1 := s.v1alpha2, s.v1beta1
	good := func() *unstructured.Unstructured { return rootShapeImport(t, s.ns) }
	// A good v1alpha2 object is accepted (validated against v1alpha2's
	// schema) but stored as v1beta1, whose schema has none of the root
	// fields: conversion None changes only apiVersion, and pruning against
	// the storage schema drops type, ips, ports, sessionAffinity,
	// sessionAffinityConfig and clusters. What is left is metadata and the
	// empty spec, in the create's answer already and in every later read,
	// through either shape. That is why, on this CRD, objects are written
	// through v1beta1 (the README says so).
	created, err := v1alpha2.Create(ctx, good(), metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("a v1alpha2 ServiceImport of the proposed shape: %v", err)
	}
	t.Cleanup(func() { deleteQuietly(v1alpha2, "good") })
	back, err := v1alpha2.Get(ctx, "good", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	backSpec, err := v1beta1.Get(ctx, "good", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		what string
		obj  map[string]any
	}{{"create's answer", created.Object}, {"read through v1alpha2", back.Object}, {"read through v1beta1", backSpec.Object}} {
		if g := mustJSON(besideMeta(r.obj)); g != `{"spec":{}}` {
			t.Errorf("v1alpha2 object, %s: %s, want only the empty spec (v1alpha2 is not the storage version)", r.what, g)
		}
	}

}

// checkV1alpha2Storage: with v1alpha2 the storage version, a v1alpha2 object
// reads back whole and a v1beta1 one keeps its empty spec only.
func checkV1alpha2Storage(ctx context.Context, t *testing.T, ns string) {
	version := func(e *harness.Env, v string) dynamic.ResourceInterface {
		return e.Dynamic.Resource(cache.ServiceImports(v)).Namespace(ns)
	}
	good := func() *unstructured.Unstructured { return rootShapeImport(t, ns) }
	spec := func() *unstructured.Unstructured { return specShapeImport(t, ns) }
	senv, err := harness.Start(harness.Options{Repo: env.Repo, CRDDirectoryPaths: []string{filepath.Join(env.Repo, "deploy", "crds-v1alpha2-storage")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := senv.Stop(); err != nil {
			t.Error(err)
		}
	})
	if len(senv.CRDs) != 1 || harness.StorageVersion(senv.CRDs[0]) != "v1alpha2" {
		t.Fatalf("deploy/crds-v1alpha2-storage installed %d CRDs, want 1 with v1alpha2 the storage version", len(senv.CRDs))
	}
	if _, err := senv.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"); err != nil {
		t.Fatal(err)
	}
	sv1alpha2, sv1beta1 := version(senv, "v1alpha2"), version(senv, "v1beta1")
	if _, err := sv1alpha2.Create(ctx, good(), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("a v1alpha2 ServiceImport of the proposed shape: %v", err)
	}
	back, err := sv1alpha2.Get(ctx, "good", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := good().Object
	ports, _, _ := unstructured.NestedSlice(want, "ports")
	ports[2].(map[string]any)["protocol"] = "TCP"
	_ = unstructured.SetNestedSlice(want, ports, "ports")
	for _, field := range rootFields {
		if g, w := mustJSON(back.Object[field]), mustJSON(want[field]); g != w {
			t.Errorf("v1alpha2 %s read back as %s, want %s", field, g, w)
		}
	}
	// And the other way round: a v1beta1 object there keeps its empty
	// spec only.
	if _, err := sv1beta1.Create(ctx, spec(), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("a v1beta1 ServiceImport: %v", err)
	}
	if back, err := sv1beta1.Get(ctx, "spec-shape", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if g := mustJSON(besideMeta(back.Object)); g != `{"spec":{}}` {
		t.Errorf("v1beta1 object on v1alpha2 storage read back as %s, want {\"spec\":{}}", g)
	}
}

// besideMeta is an object's fields but apiVersion, kind and metadata.
func besideMeta(o map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range o {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			out[k] = v
		}
	}
	return out
}

// deleteQuietly deletes an object at the end of a test, whatever happened.
func deleteQuietly(ri dynamic.ResourceInterface, name string) {
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	_ = ri.Delete(ctx, name, metav1.DeleteOptions{})
}

func set(v any, field string) func(map[string]any) {
	return func(o map[string]any) { o[field] = v }
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	objs, err := contract.DecodeYAML([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decoding %q: %d objects, %v", doc, len(objs), err)
	}
	return objs[0]
}

// mustJSON renders v for comparisons and messages; map keys come sorted.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// dryRunAll sends every object to the API server with a server-side dry
// run, field validation strict: a full update of the object stored already,
// or a create. Objects for which real says so are created for real when
// absent, and removed when the test ends.
func dryRunAll(t *testing.T, objs []*unstructured.Unstructured, real func(*unstructured.Unstructured) bool) {
	t.Helper()
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	dryRun := []string{metav1.DryRunAll}
	for _, o := range objs {
		desc := contract.Describe(o)
		ri, err := env.Resource(o)
		if err != nil {
			t.Errorf("%s: %v", desc, err)
			continue
		}
		stored, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case err == nil:
			u := o.DeepCopy()
			u.SetResourceVersion(stored.GetResourceVersion())
			if _, err := ri.Update(ctx, u, metav1.UpdateOptions{DryRun: dryRun, FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: dry-run update of the stored object: %v", desc, err)
			} else {
				t.Logf("%s: exists; dry-run update passed", desc)
			}
		case !apierrors.IsNotFound(err):
			t.Errorf("%s: %v", desc, err)
		case real != nil && real(o):
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: create: %v", desc, err)
				continue
			}
			t.Logf("%s: was absent; created", desc)
			t.Cleanup(func() {
				ctx, cancel := harness.Context(30 * time.Second)
				defer cancel()
				if err := env.Delete(ctx, o); err != nil {
					t.Error(err)
				}
			})
		default:
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: dryRun, FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: dry-run create: %v", desc, err)
				continue
			}
			// A dry run stores nothing.
			if _, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: after a dry-run create, get: %v, want NotFound", desc, err)
			}
			t.Logf("%s: dry-run create passed", desc)
		}
	}

}

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/internal/contract"
)

// chartDir is the Helm chart that deploy/*.yaml are rendered from
// (hack/generate.sh).
const chartDir = "deploy/chart/coredns-multicluster"

// chartDigest is a well-formed image digest for the tests' values.
const chartDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// chartEverything turns every optional part of the chart on and sets every
// value a user is likely to set.
const chartEverything = `
image:
  repository: registry.example/dns/coredns-multicluster
  digest: ` + chartDigest + `
  pullPolicy: Always
imagePullSecrets:
- name: registry-example
replicaCount: 3
resources:
  requests: {cpu: 250m, memory: 128Mi}
  limits: {cpu: "1", memory: 512Mi}
corefile:
  multiclusterOptions: |
    ttl 10
    fallthrough
  extraPlugins: |
    log
topologySpread:
  whenUnsatisfiable: DoNotSchedule
  topologyKeys: [kubernetes.io/hostname]
podDisruptionBudget:
  enabled: false
priorityClassName: ""
podAnnotations:
  example.com/team: dns
service:
  annotations: {}
prometheus:
  monitor:
    enabled: true
    interval: 15s
    additionalLabels: {release: kube-prometheus-stack}
prometheusRule:
  enabled: true
  labels: {release: kube-prometheus-stack}
dashboard:
  enabled: true
  annotations: {grafana_folder: DNS}
`

// helm runs the helm that hack/generate.sh builds from hack/tools into
// .cache/tools, in the repository, with its cache, configuration and data
// in a temporary directory. It returns standard output.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := filepath.Join(env.Repo, ".cache", "tools", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: hack/generate.sh builds helm (hack/tools) there", err)
	}
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Dir = env.Repo
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// valuesFile writes values to a file for helm's --values.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// renderChart runs helm template for release in ns with extra arguments and
// decodes the objects.
func renderChart(t *testing.T, release, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := contract.DecodeYAML(out)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return objs
}

func describeAll(objs []*unstructured.Unstructured) []string {
	var d []string
	for _, o := range objs {
		d = append(d, contract.Describe(o))
	}
	slices.Sort(d)
	return d
}

// TestChartLint: helm lint --strict passes with the default values and with
// every optional part on, and the values schema refuses a misspelt value and
// a malformed digest.
func TestChartLint(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults":   nil,
		"everything": {"--values", valuesFile(t, chartEverything)},
		"in deploy/": {"--set", "chartLabels=false", "--namespace", deployNS},
	} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else {
			t.Logf("%s: %s", name, strings.TrimSpace(string(out)))
		}
	}
	for set, want := range map[string]string{
		"replicaz=3":                             "replicaz",
		"replicas=3":                             "replicas",
		"pdb.enabled=false":                      "pdb",
		"serviceMonitor.enabled=true":            "serviceMonitor",
		"image.digest=latest":                    "digest",
		"podDisruptionBudget.maxUnavailable=one": "maxUnavailable",
		"topologySpread.maxSkew=zero":            "maxSkew",
		"rbac.create=no":                         "create",
	} {
		if _, err := helm(t, "lint", "--strict", chartDir, "--set", set); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm lint --set %s: %v, want a schema error naming %s", set, err, want)
		}
	}
}

// TestChartRendersDeploy: the chart with its default values and
// chartLabels=false, released as coredns-multicluster in kube-system, gives
// exactly the objects of deploy/*.yaml (hack/test.sh checks the bytes; this
// is the same check without hack/generate.sh), and the chart's crds/ holds
// deploy/crds' CRD.
func TestChartRendersDeploy(t *testing.T) {
	rendered := renderChart(t, deployName, deployNS, "--set", "chartLabels=false", "--include-crds")
	deployed := deployObjects(t)
	if got, want := describeAll(rendered), describeAll(deployed); !slices.Equal(got, want) {
		t.Fatalf("the chart renders %q, deploy/ and deploy/crds hold %q", got, want)
	}
	for _, d := range deployed {
		for _, r := range rendered {
			if contract.Describe(r) == contract.Describe(d) && !reflect.DeepEqual(r.Object, d.Object) {
				t.Errorf("%s: the chart renders\n%s\ndeploy/ holds\n%s (run hack/generate.sh)", contract.Describe(d), mustJSON(r.Object), mustJSON(d.Object))
			}
		}
	}

	// A Helm release's labels otherwise, on every object and in the selectors.
	for _, o := range renderChart(t, deployName, deployNS) {
		l := o.GetLabels()
		if l["app.kubernetes.io/managed-by"] != "Helm" || l["app.kubernetes.io/instance"] != deployName || l["helm.sh/chart"] == "" {
			t.Errorf("%s: labels %v, want a Helm release's", contract.Describe(o), l)
		}
		if o.GetKind() == "Deployment" {
			d := find[appsv1.Deployment](t, []*unstructured.Unstructured{o}, "Deployment")
			if d.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != deployName {
				t.Errorf("Deployment selector %v, want the release's instance label", d.Spec.Selector.MatchLabels)
			}
		}
	}
}

// TestChartDryRun renders the chart with the default values and with every
// optional part on, and sends every object to the real API server with a
// server-side dry run (strict field validation): a create, or a full update
// of the object stored already. For the ServiceMonitor and the
// PrometheusRule it installs their CRDs, generated by controller-gen from
// the Prometheus Operator's Go types (as the Prometheus Operator generates
// its own; no Go module ships its CRD files), and also decodes both strictly
// into those types and checks them against the Service and deploy/monitoring.
func TestChartDryRun(t *testing.T) {
	const ns = "chart-test"
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
	installMonitoringCRDs(t)

	t.Run("defaults", func(t *testing.T) {
		objs := renderChart(t, deployName, deployNS, "--include-crds")
		want := []string{
			"ClusterRole " + deployName,
			"ClusterRoleBinding " + deployName,
			"ConfigMap " + deployNS + "/" + deployName,
			"CustomResourceDefinition " + crdName,
			"Deployment " + deployNS + "/" + deployName,
			"PodDisruptionBudget " + deployNS + "/" + deployName,
			"Service " + deployNS + "/" + deployName,
			"ServiceAccount " + deployNS + "/" + deployName,
		}
		if got := describeAll(objs); !slices.Equal(got, want) {
			t.Errorf("objects %q, want %q", got, want)
		}
		dryRunAll(t, objs, nil)
	})

	t.Run("everything", func(t *testing.T) {
		// A release name without the chart's: every object is <release>-coredns-multicluster.
		const release, name = "dns", "dns-coredns-multicluster"
		objs := renderChart(t, release, ns, "--values", valuesFile(t, chartEverything))
		want := []string{
			"ClusterRole " + name,
			"ClusterRoleBinding " + name,
			"ConfigMap " + ns + "/" + name,
			"ConfigMap " + ns + "/" + name + "-dashboard",
			"Deployment " + ns + "/" + name,
			"PrometheusRule " + ns + "/" + name,
			"Service " + ns + "/" + name,
			"ServiceAccount " + ns + "/" + name,
			"ServiceMonitor " + ns + "/" + name,
		}
		if got := describeAll(objs); !slices.Equal(got, want) {
			t.Errorf("objects %q, want %q (no PodDisruptionBudget)", got, want)
		}
		dryRunAll(t, objs, nil)

		svc := checkChartCore(t, objs, name)
		checkChartMonitoring(t, objs, svc, ns)
		checkChartDashboard(t, objs, name)
	})
}

// checkChartCore checks the objects named name (the chart's own, beside
// the monitoring ones) against chartEverything's values, and returns the
// Service.
func checkChartCore(t *testing.T, objs []*unstructured.Unstructured, name string) *corev1.Service {
	t.Helper()
	var core []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() == name {
			core = append(core, o)
		}
	}
	d := find[appsv1.Deployment](t, core, "Deployment")
	svc := find[corev1.Service](t, core, "Service")
	cm := find[corev1.ConfigMap](t, core, "ConfigMap")
	c := d.Spec.Template.Spec.Containers[0]
	if want := "registry.example/dns/coredns-multicluster@" + chartDigest; c.Image != want || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s (%s), want %s (Always)", c.Image, c.ImagePullPolicy, want)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	if c.Resources.Limits.Cpu().String() != "1" || c.Resources.Requests.Memory().String() != "128Mi" {
		t.Errorf("resources %s, want the values'", mustJSON(c.Resources))
	}
	if tsc := d.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("topology spread %s, want one on hostname, DoNotSchedule", mustJSON(tsc))
	}
	if d.Spec.Template.Spec.ServiceAccountName != name || d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != name {
		t.Errorf("the pods run as %s with ConfigMap %s, want %s", d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.Volumes[0].ConfigMap.Name, name)
	}
	conf := parseCorefile(t, cm.Data["Corefile"])
	for _, line := range []string{"log", "multicluster clusterset.local {", "ttl 10", "fallthrough"} {
		if !slices.ContainsFunc(strings.Split(conf.text, "\n"), func(l string) bool { return strings.TrimSpace(l) == line }) {
			t.Errorf("the Corefile has no line %q:\n%s", line, conf.text)
		}
	}
	return svc
}

// checkChartMonitoring checks the Prometheus Operator's objects, strictly
// into their Go types: the ServiceMonitor selects svc in ns, the
// PrometheusRule holds deploy/monitoring's rules.
func checkChartMonitoring(t *testing.T, objs []*unstructured.Unstructured, svc *corev1.Service, ns string) {
	t.Helper()
	sm := find[monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor")
	if sm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v, want the values'", sm.Labels)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(svc.Labels)) || len(sm.Spec.Endpoints) != 1 ||
		!slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) ||
		!slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{ns}) {
		t.Errorf("ServiceMonitor %s does not select the Service (labels %v, ports %s)", mustJSON(sm.Spec), svc.Labels, mustJSON(svc.Spec.Ports))
	}
	rule := find[monitoringv1.PrometheusRule](t, objs, "PrometheusRule")
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(env.Repo, "deploy/monitoring/prometheus/coredns-multicluster.rules.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(data, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, file.Groups) {
		t.Errorf("PrometheusRule groups %s, want deploy/monitoring's %s", mustJSON(rule.Spec.Groups), mustJSON(file.Groups))
	}
}

// checkChartDashboard checks that ConfigMap name-dashboard holds
// deploy/monitoring/dashboard.json, labelled and annotated for Grafana.
func checkChartDashboard(t *testing.T, objs []*unstructured.Unstructured, name string) {
	t.Helper()
	dash := find[corev1.ConfigMap](t, slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		return o.GetName() != name+"-dashboard"
	}), "ConfigMap")
	dashJSON, err := os.ReadFile(filepath.Join(env.Repo, "deploy/monitoring/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := dash.Data["coredns-multicluster.json"]
	if strings.TrimSpace(got) != strings.TrimSpace(string(dashJSON)) || !json.Valid([]byte(got)) {
		t.Errorf("the dashboard ConfigMap does not hold deploy/monitoring/dashboard.json")
	}
	if dash.Labels["grafana_dashboard"] != "1" || dash.Annotations["grafana_folder"] != "DNS" {
		t.Errorf("dashboard ConfigMap labels %v, annotations %v", dash.Labels, dash.Annotations)
	}
}

// installMonitoringCRDs installs the CRDs of ServiceMonitor and
// PrometheusRule for the rest of t: controller-gen (hack/generate.sh builds
// it from hack/tools into .cache/tools) generates them from the Prometheus
// Operator's package monitoring/v1 at the version of test/e2e's go.mod.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	bin := filepath.Join(env.Repo, ".cache", "tools", "controller-gen")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: hack/generate.sh builds controller-gen (hack/tools) there", err)
	}
	dir := t.TempDir()
	pkg := reflect.TypeFor[monitoringv1.ServiceMonitor]().PkgPath()
	cmd := exec.Command(bin, "crd", "paths="+pkg, "output:crd:dir="+dir)
	cmd.Dir = filepath.Join(env.Repo, "test", "e2e")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen crd paths=%s: %v\n%s", pkg, err, out)
	}
	opts := envtest.CRDInstallOptions{
		Paths: []string{
			filepath.Join(dir, monitoringv1.SchemeGroupVersion.Group+"_"+monitoringv1.ServiceMonitorName+".yaml"),
			filepath.Join(dir, monitoringv1.SchemeGroupVersion.Group+"_"+monitoringv1.PrometheusRuleName+".yaml"),
		},
		ErrorIfPathMissing: true,
		MaxTime:            time.Minute,
	}
	crds, err := envtest.InstallCRDs(env.Config, opts)
	env.Mapper.Reset()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		t.Logf("installed CRD %s (controller-gen, %s)", c.Name, pkg)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(env.Config, opts); err != nil {
			t.Error(err)
		}
		env.Mapper.Reset()
	})
}

// chartAppVersion is the appVersion of the chart's Chart.yaml, the image tag
// when image.tag is empty.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, chartDir+"/Chart.yaml")), &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("%s/Chart.yaml: appVersion %q, %v", chartDir, chart.AppVersion, err)
	}
	return chart.AppVersion
}

// TestChartAccountsAndTag: the values coredns/helm users know decide the
// image's tag (empty: Chart.yaml's appVersion, never latest), whether the
// chart makes the ServiceAccount (serviceAccount.create, .name,
// .annotations) and the ClusterRole with its binding (rbac.create), and the
// ServiceAccount the pods run as (serviceAccount.name, else "default" when
// the chart makes none).
func TestChartAccountsAndTag(t *testing.T) {
	const repo = "ghcr.io/clustersetdns/coredns-multicluster"
	app := chartAppVersion(t)
	for _, tc := range []struct {
		name    string
		set     []string
		image   string // the container's image
		account string // the pods' ServiceAccount
		sa      bool   // a ServiceAccount object, named account
		rbac    bool   // a ClusterRole and a ClusterRoleBinding to account
	}{
		{"defaults", nil, repo + ":" + app, deployName, true, true},
		{"image.tag", []string{"image.tag=v9.9.9"}, repo + ":v9.9.9", deployName, true, true},
		{"image.digest over image.tag", []string{"image.tag=v9.9.9", "image.digest=" + chartDigest}, repo + "@" + chartDigest, deployName, true, true},
		{"serviceAccount.name", []string{"serviceAccount.name=dns", "serviceAccount.annotations.example\\.com/role=dns"}, repo + ":" + app, "dns", true, true},
		{"no serviceAccount, no rbac", []string{"serviceAccount.create=false", "rbac.create=false"}, repo + ":" + app, "default", false, false},
		{"own serviceAccount, no rbac", []string{"serviceAccount.create=false", "serviceAccount.name=dns", "rbac.create=false"}, repo + ":" + app, "dns", false, false},
		{"own serviceAccount, rbac", []string{"serviceAccount.create=false", "serviceAccount.name=dns"}, repo + ":" + app, "dns", false, true},
		{"serviceAccount, no rbac", []string{"rbac.create=false"}, repo + ":" + app, deployName, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			objs := renderChart(t, deployName, deployNS, args...)
			d := find[appsv1.Deployment](t, objs, "Deployment")
			if c := d.Spec.Template.Spec.Containers[0]; c.Image != tc.image {
				t.Errorf("image %s, want %s", c.Image, tc.image)
			}
			if got := d.Spec.Template.Spec.ServiceAccountName; got != tc.account {
				t.Errorf("the pods run as %q, want %q", got, tc.account)
			}
			var sa, roles, bindings []*unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "ServiceAccount":
					sa = append(sa, o)
				case "ClusterRole":
					roles = append(roles, o)
				case "ClusterRoleBinding":
					bindings = append(bindings, o)
				}
			}
			if tc.sa {
				s := find[corev1.ServiceAccount](t, sa, "ServiceAccount")
				if s.Name != tc.account || s.Namespace != deployNS {
					t.Errorf("ServiceAccount %s/%s, want %s/%s", s.Namespace, s.Name, deployNS, tc.account)
				}
				if slices.Contains(tc.set, "serviceAccount.annotations.example\\.com/role=dns") && s.Annotations["example.com/role"] != "dns" {
					t.Errorf("ServiceAccount annotations %v, want the values'", s.Annotations)
				}
			} else if len(sa) != 0 {
				t.Errorf("%d ServiceAccounts, want none (serviceAccount.create=false)", len(sa))
			}
			if !tc.rbac {
				if len(roles)+len(bindings) != 0 {
					t.Errorf("%d ClusterRoles and %d ClusterRoleBindings, want none (rbac.create=false)", len(roles), len(bindings))
				}
				return
			}
			role := find[rbacv1.ClusterRole](t, roles, "ClusterRole")
			b := find[rbacv1.ClusterRoleBinding](t, bindings, "ClusterRoleBinding")
			if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind ||
				b.Subjects[0].Name != tc.account || b.Subjects[0].Namespace != deployNS {
				t.Errorf("ClusterRoleBinding %s binds %+v to %s, want ServiceAccount %s/%s to %s", b.Name, b.Subjects, b.RoleRef.Name, deployNS, tc.account, role.Name)
			}
		})
	}
}

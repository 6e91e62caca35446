package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	kubeadmImage = "registry.k8s.io/coredns/coredns:v1.12.1"
	ourImage     = "registry.example/coredns-multicluster:v0.1.0"
)

// kubeadmRules are the rules of kubeadm's ClusterRole system:coredns as
// kubeadm's own code renders them: hack/realenv/kubeadmdns (kubeadm v1.37.2's
// cmd/kubeadm/app/phases/addons/dns), which hack/realenv/build.sh runs into
// .cache/bin/kubeadm-coredns.yaml. Without that file the test fails under
// MULTICLUSTER_NO_SKIP (hack/test.sh) and is skipped elsewhere.
func kubeadmRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	const rendering = "../../.cache/bin/kubeadm-coredns.yaml"
	f, err := os.Open(rendering)
	if err != nil {
		why := fmt.Sprintf("%v: hack/realenv/build.sh renders kubeadm's CoreDNS objects there", err)
		if os.Getenv("MULTICLUSTER_NO_SKIP") != "" {
			t.Fatal(why + " (MULTICLUSTER_NO_SKIP is set: nothing may be skipped)")
		}
		t.Skip(why)
	}
	defer f.Close()
	for d := yaml.NewYAMLOrJSONDecoder(f, 4096); ; {
		var r rbacv1.ClusterRole
		if err := d.Decode(&r); err != nil {
			t.Fatalf("%s: no ClusterRole system:coredns: %v", rendering, err)
		}
		if r.Kind == "ClusterRole" && r.Name == "system:coredns" {
			return r.Rules
		}
	}
}

// kubeadmObjects are the objects kubeadm creates, as the API server returns
// them (the Deployment rolled out).
func kubeadmObjects(t *testing.T, corefileFile string) (*corev1.ConfigMap, *appsv1.Deployment, *rbacv1.ClusterRole) {
	t.Helper()
	corefile, err := os.ReadFile(corefileFile)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Data:       map[string]string{"Corefile": string(corefile)},
	}
	two := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "coredns", Image: kubeadmImage, Args: []string{"-conf", "/etc/coredns/Corefile"},
			}}}},
		},
		Status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, ReadyReplicas: 2},
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: kubeadmRules(t)}
	return cm, dep, role
}

func newOptions() (*options, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &options{
		namespace: "kube-system", configMap: "coredns", key: "Corefile", deployment: "coredns", container: "coredns",
		clusterRole: "system:coredns", zone: "clusterset.local", image: ourImage, wait: 10 * time.Second,
		out: &out, errOut: &errOut,
	}, &out, &errOut
}

// writes lists the clientset's writes since the last call, as "verb
// resource/name".
func writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		res := a.GetResource().Resource
		switch a.GetVerb() {
		case "create", "update":
			out = append(out, a.GetVerb()+" "+res+"/"+name(a.(interface{ GetObject() runtime.Object }).GetObject()))
		case "delete", "patch":
			out = append(out, a.GetVerb()+" "+res+"/"+a.(interface{ GetName() string }).GetName())
		}
	}
	c.ClearActions()
	return out
}

func name(o runtime.Object) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName()
	}
	return "?"
}

type current struct {
	cm   *corev1.ConfigMap
	dep  *appsv1.Deployment
	role *rbacv1.ClusterRole
}

func fetch(t *testing.T, c *fake.Clientset) current {
	t.Helper()
	ctx := context.Background()
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role, err := c.RbacV1().ClusterRoles().Get(ctx, "system:coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return current{cm, dep, role}
}

func stateExists(t *testing.T, c *fake.Clientset) bool {
	_, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), stateName, metav1.GetOptions{})
	return err == nil
}

func assertOriginal(t *testing.T, c *fake.Clientset, cm *corev1.ConfigMap, dep *appsv1.Deployment, role *rbacv1.ClusterRole) {
	t.Helper()
	got := fetch(t, c)
	if !reflect.DeepEqual(got.cm.Data, cm.Data) {
		t.Errorf("ConfigMap data not restored:\n%s", lineDiff(cm.Data["Corefile"], got.cm.Data["Corefile"]))
	}
	if !reflect.DeepEqual(got.role.Rules, role.Rules) {
		t.Errorf("rules not restored: %+v", got.role.Rules)
	}
	if img := got.dep.Spec.Template.Spec.Containers[0].Image; img != kubeadmImage {
		t.Errorf("image %s, want %s", img, kubeadmImage)
	}
	for _, p := range [][2]metav1.Object{{got.cm, cm}, {got.dep, dep}, {got.role, role}} {
		if !reflect.DeepEqual(p[0].GetLabels(), p[1].GetLabels()) || !reflect.DeepEqual(p[0].GetAnnotations(), p[1].GetAnnotations()) {
			t.Errorf("%s: labels %v annotations %v, want %v %v", p[0].GetName(), p[0].GetLabels(), p[0].GetAnnotations(), p[1].GetLabels(), p[1].GetAnnotations())
		}
	}
	if stateExists(t, c) {
		t.Errorf("configmap/%s still there", stateName)
	}
}

func TestInstallUninstallKubeadm(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, out, _ := newOptions()
	ctx := context.Background()

	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{
		"create configmaps/" + stateName,
		"update clusterroles/system:coredns",
		"update deployments/coredns",
		"update configmaps/coredns",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("install wrote %q, want %q", got, want)
	}
	got := fetch(t, c)
	golden, err := os.ReadFile("testdata/kubeadm.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got.cm.Data["Corefile"] != string(golden) {
		t.Errorf("Corefile:\n%s", lineDiff(string(golden), got.cm.Data["Corefile"]))
	}
	if img := got.dep.Spec.Template.Spec.Containers[0].Image; img != ourImage {
		t.Errorf("image %s", img)
	}
	wantRules := append(kubeadmRules(t), neededRules[0], neededRules[2], neededRules[3])
	if !reflect.DeepEqual(got.role.Rules, wantRules) {
		t.Errorf("rules %+v\nwant %+v", got.role.Rules, wantRules)
	}
	if !strings.Contains(out.String(), "clusterrole.rbac.authorization.k8s.io/system:coredns: added 3 rules") {
		t.Errorf("output:\n%s", out)
	}
	st, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, stateName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Labels["app.kubernetes.io/name"] != "coredns-multicluster" || st.Data["corefile.original"] != cm.Data["Corefile"] || st.Data["image.original"] != kubeadmImage {
		t.Errorf("state %+v", st)
	}

	// Again: nothing to do.
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("second install wrote %q", w)
	}

	if err := uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{
		"update configmaps/coredns",
		"update deployments/coredns",
		"update clusterroles/system:coredns",
		"delete configmaps/" + stateName,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("uninstall wrote %q, want %q", got, want)
	}
	assertOriginal(t, c, cm, dep, role)

	// Not installed: nothing to do.
	if err := uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("second uninstall wrote %q", w)
	}
}

// TestInstallNewImage: install over an install sets the image only and keeps
// the originals; uninstall still restores kubeadm's image.
func TestInstallNewImage(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, _, _ := newOptions()
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	writes(c)
	o.image = ourImage + "-2"
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{"update configmaps/" + stateName, "update deployments/coredns"}; !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %q, want %q", got, want)
	}
	if img := fetch(t, c).dep.Spec.Template.Spec.Containers[0].Image; img != o.image {
		t.Errorf("image %s", img)
	}
	if err := uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	assertOriginal(t, c, cm, dep, role)
}

// TestInstallConvertsKubernetesOption: the Cilium set-up (the kubernetes
// plugin's own multicluster option) is converted, and uninstall gives it back.
func TestInstallConvertsKubernetesOption(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/cilium-kubeadm.Corefile")
	// What Cilium's guide adds, a rule install does not need to add again.
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"list", "watch"}})
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, out, _ := newOptions()
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	got := fetch(t, c)
	golden, _ := os.ReadFile("testdata/cilium-kubeadm.golden")
	if got.cm.Data["Corefile"] != string(golden) {
		t.Errorf("Corefile:\n%s", lineDiff(string(golden), got.cm.Data["Corefile"]))
	}
	if n := len(got.role.Rules) - len(role.Rules); n != 2 || !reflect.DeepEqual(got.role.Rules[len(got.role.Rules)-2:], neededRules[2:]) {
		t.Errorf("added %d rules: %+v", n, got.role.Rules)
	}
	if !strings.Contains(out.String(), "added 2 rules") {
		t.Errorf("output:\n%s", out)
	}
	if err := uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	assertOriginal(t, c, cm, dep, role)
}

func TestUninstallRefusesChanges(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*fake.Clientset)
		msg    string
	}{
		{"corefile", func(c *fake.Clientset) {
			cm, _ := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
			cm.Data["Corefile"] += "example.org:53 {\n    whoami\n}\n"
			c.CoreV1().ConfigMaps("kube-system").Update(context.Background(), cm, metav1.UpdateOptions{})
		}, "configmap/coredns: the Corefile changed since install"},
		{"image", func(c *fake.Clientset) {
			d, _ := c.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
			d.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/coredns/coredns:v1.13.1"
			c.AppsV1().Deployments("kube-system").Update(context.Background(), d, metav1.UpdateOptions{})
		}, "deployment.apps/coredns: container coredns runs registry.k8s.io/coredns/coredns:v1.13.1, not the installed " + ourImage},
		{"rules", func(c *fake.Clientset) {
			r, _ := c.RbacV1().ClusterRoles().Get(context.Background(), "system:coredns", metav1.GetOptions{})
			r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}})
			c.RbacV1().ClusterRoles().Update(context.Background(), r, metav1.UpdateOptions{})
		}, "clusterrole.rbac.authorization.k8s.io/system:coredns: its rules changed since install"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
			cs := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
			o, _, errOut := newOptions()
			ctx := context.Background()
			if err := install(ctx, cs, o); err != nil {
				t.Fatal(err)
			}
			c.change(cs)
			writes(cs)
			err := uninstall(ctx, cs, o)
			if err == nil || !isRefusal(err) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("uninstall: %v", err)
			}
			if w := writes(cs); len(w) != 0 {
				t.Errorf("a refused uninstall wrote %q", w)
			}
			o.force = true
			if err := uninstall(ctx, cs, o); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(errOut.String(), "restoring the original anyway (--force)") {
				t.Errorf("stderr:\n%s", errOut)
			}
			assertOriginal(t, cs, cm, dep, role)
		})
	}
}

// TestInstallRefusalWritesNothing: a Corefile install cannot edit stops it
// before any write.
func TestInstallRefusalWritesNothing(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/refuse-forward-block.Corefile")
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, _, _ := newOptions()
	err := install(context.Background(), c, o)
	if err == nil || !isRefusal(err) || !strings.Contains(err.Error(), `server block "clusterset.local:53" (line 24) already takes clusterset.local`) {
		t.Fatalf("install: %v", err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("wrote %q", w)
	}
}

func TestDryRun(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, out, _ := newOptions()
	o.dryRun = true
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("dry run wrote %q", w)
	}
	for _, s := range []string{
		"(dry run) clusterrole.rbac.authorization.k8s.io/system:coredns: added 3 rules",
		"(dry run) deployment.apps/coredns: image coredns=" + ourImage + " (was " + kubeadmImage + ")",
		"+7:     multicluster clusterset.local",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	o.dryRun = false
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	writes(c)
	o.dryRun = true
	if err := uninstall(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("dry run wrote %q", w)
	}
	if !strings.Contains(out.String(), "-7:     multicluster clusterset.local") {
		t.Errorf("output:\n%s", out)
	}
}

// TestInstallWaitsForRollout: the Corefile is not written while old pods run.
func TestInstallWaitsForRollout(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	dep.Status.UpdatedReplicas = 1 // never finishes in the fake
	c := fake.NewClientset(cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, _, _ := newOptions()
	o.wait = 100 * time.Millisecond
	err := install(context.Background(), c, o)
	if err == nil || !strings.Contains(err.Error(), "did not roll out") {
		t.Fatalf("install: %v", err)
	}
	if got := fetch(t, c).cm.Data["Corefile"]; got != cm.Data["Corefile"] {
		t.Errorf("the Corefile was written before the rollout")
	}
	// Once it has rolled out, install again finishes the job.
	d, _ := c.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
	d.Status.UpdatedReplicas = 2
	c.AppsV1().Deployments("kube-system").UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	o.wait = 10 * time.Second
	if err := install(context.Background(), c, o); err != nil {
		t.Fatal(err)
	}
	golden, _ := os.ReadFile("testdata/kubeadm.golden")
	if got := fetch(t, c).cm.Data["Corefile"]; got != string(golden) {
		t.Errorf("Corefile:\n%s", lineDiff(string(golden), got))
	}
}

func TestRunCorefile(t *testing.T) {
	in, _ := os.ReadFile("testdata/refuse-forward-block.Corefile")
	var out, errOut bytes.Buffer
	if code := run([]string{"corefile"}, bytes.NewReader(in), &out, &errOut); code != 2 || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "error: server block") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	in, _ = os.ReadFile("testdata/kubeadm.Corefile")
	golden, _ := os.ReadFile("testdata/kubeadm.golden")
	out.Reset()
	errOut.Reset()
	if code := run([]string{"corefile", "--zone", "clusterset.local"}, bytes.NewReader(in), &out, &errOut); code != 0 || out.String() != string(golden) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if code := run([]string{"install"}, nil, &out, &errOut); code != 2 {
		t.Errorf("install without --image: exit %d", code)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/miekg/dns"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "coredns", Containers: []corev1.Container{{
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
		zone: "clusterset.local", image: ourImage, wait: 10 * time.Second,
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

// newClientset is a fake API server with objs in which CoreDNS's own
// ClusterRole, system:coredns, may be neither read nor written: the tests
// read it from the tracker.
func newClientset(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("*", "clusterroles", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := ""
		switch a := a.(type) {
		case k8stesting.GetAction:
			n = a.GetName()
		case k8stesting.DeleteAction:
			n = a.GetName()
		case k8stesting.CreateAction:
			n = name(a.GetObject())
		case k8stesting.UpdateAction:
			n = name(a.GetObject())
		}
		if n == "system:coredns" {
			t.Errorf("%s clusterroles/%s: the command touched CoreDNS's own ClusterRole", a.GetVerb(), n)
		}
		return false, nil, nil
	})
	return c
}

type current struct {
	cm      *corev1.ConfigMap
	dep     *appsv1.Deployment
	role    *rbacv1.ClusterRole // system:coredns
	ours    *rbacv1.ClusterRole // nil when not found
	binding *rbacv1.ClusterRoleBinding
}

func fetch(t *testing.T, c *fake.Clientset) current {
	t.Helper()
	ctx := context.Background()
	var cur current
	var err error
	if cur.cm, err = c.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if cur.dep, err = c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Tracker().Get(rbacv1.SchemeGroupVersion.WithResource("clusterroles"), "", "system:coredns")
	if err != nil {
		t.Fatal(err)
	}
	cur.role = o.(*rbacv1.ClusterRole)
	if cur.ours, err = c.RbacV1().ClusterRoles().Get(ctx, stateName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		cur.ours = nil
	} else if err != nil {
		t.Fatal(err)
	}
	if cur.binding, err = c.RbacV1().ClusterRoleBindings().Get(ctx, stateName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		cur.binding = nil
	} else if err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	return cur
}

func stateExists(t *testing.T, c *fake.Clientset) bool {
	_, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), stateName, metav1.GetOptions{})
	return err == nil
}

// assertInstalledRBAC: our ClusterRole holds exactly neededRules and our
// binding binds it to kube-system/sa; system:coredns is as kubeadm made it.
func assertInstalledRBAC(t *testing.T, got current, role *rbacv1.ClusterRole, sa string) {
	t.Helper()
	if got.ours == nil || !reflect.DeepEqual(got.ours.Rules, neededRules) || got.ours.Labels[managedBy] != stateName || got.ours.Labels["app.kubernetes.io/name"] != "coredns-multicluster" {
		t.Errorf("clusterrole %s: %+v, want the rules %+v and our labels", stateName, got.ours, neededRules)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "kube-system"}}
	wantRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: stateName}
	if b := got.binding; b == nil || !reflect.DeepEqual(b.Subjects, wantSubjects) || b.RoleRef != wantRef || b.Labels[managedBy] != stateName {
		t.Errorf("clusterrolebinding %s: %+v, want subjects %+v, roleRef %+v and our labels", stateName, b, wantSubjects, wantRef)
	}
	if !reflect.DeepEqual(got.role, role) {
		t.Errorf("system:coredns changed: %+v", got.role)
	}
}

func assertOriginal(t *testing.T, c *fake.Clientset, cm *corev1.ConfigMap, dep *appsv1.Deployment, role *rbacv1.ClusterRole) {
	t.Helper()
	got := fetch(t, c)
	if !reflect.DeepEqual(got.cm.Data, cm.Data) {
		t.Errorf("ConfigMap data not restored:\n%s", lineDiff(cm.Data["Corefile"], got.cm.Data["Corefile"]))
	}
	if !reflect.DeepEqual(got.role, role) {
		t.Errorf("system:coredns changed: %+v", got.role)
	}
	if img := got.dep.Spec.Template.Spec.Containers[0].Image; img != kubeadmImage {
		t.Errorf("image %s, want %s", img, kubeadmImage)
	}
	for _, p := range [][2]metav1.Object{{got.cm, cm}, {got.dep, dep}} {
		if !reflect.DeepEqual(p[0].GetLabels(), p[1].GetLabels()) || !reflect.DeepEqual(p[0].GetAnnotations(), p[1].GetAnnotations()) {
			t.Errorf("%s: labels %v annotations %v, want %v %v", p[0].GetName(), p[0].GetLabels(), p[0].GetAnnotations(), p[1].GetLabels(), p[1].GetAnnotations())
		}
	}
	if got.ours != nil || got.binding != nil {
		t.Errorf("after uninstall: clusterrole %v, clusterrolebinding %v, want both gone", got.ours, got.binding)
	}
	if stateExists(t, c) {
		t.Errorf("configmap/%s still there", stateName)
	}
}

func TestInstallUninstallKubeadm(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, out, _ := newOptions()
	ctx := context.Background()

	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{
		"create configmaps/" + stateName,
		"create clusterroles/" + stateName,
		"create clusterrolebindings/" + stateName,
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
	assertInstalledRBAC(t, got, role, "coredns")
	if !strings.Contains(out.String(), "clusterrolebinding.rbac.authorization.k8s.io/"+stateName+": created, binds serviceaccount kube-system/coredns") {
		t.Errorf("output:\n%s", out)
	}
	st, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, stateName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Labels["app.kubernetes.io/name"] != "coredns-multicluster" || st.Data["corefile.original"] != cm.Data["Corefile"] || st.Data["image.original"] != kubeadmImage || st.Data["serviceaccount"] != "coredns" {
		t.Errorf("state %+v", st)
	}
	for _, k := range []string{"rules.original", "rules.installed", "clusterrole"} {
		if _, ok := st.Data[k]; ok {
			t.Errorf("state has the key %s", k)
		}
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
		"delete clusterrolebindings/" + stateName,
		"delete clusterroles/" + stateName,
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
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
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

// TestInstallImageOfPod: --image-of-pod installs the image of the pod's
// first container.
func TestInstallImageOfPod(t *testing.T) {
	const podImage = "registry.example/coredns-multicluster:v0.2.0"
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "in-place-install-x7k2p", Namespace: "kube-system"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "in-place", Image: podImage}, {Name: "other", Image: "busybox"}}}}
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy(), pod)
	o, _, _ := newOptions()
	o.image, o.imageOfPod = "", pod.Name
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if img := fetch(t, c).dep.Spec.Template.Spec.Containers[0].Image; img != podImage {
		t.Errorf("image %s, want the pod's %s", img, podImage)
	}
	st, _ := c.CoreV1().ConfigMaps("kube-system").Get(ctx, stateName, metav1.GetOptions{})
	if st.Data["image.installed"] != podImage {
		t.Errorf("state records image %q", st.Data["image.installed"])
	}
	o.imageOfPod = "no-such-pod"
	if err := install(ctx, c, o); err == nil || !strings.Contains(err.Error(), "pod kube-system/no-such-pod") {
		t.Errorf("install with a missing pod: %v", err)
	}
}

// TestInstallServiceAccount: the binding follows the Deployment's
// ServiceAccount ("default" when it names none) and is recreated when its
// roleRef is not our ClusterRole; our ClusterRole gets exactly the rules.
func TestInstallServiceAccount(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	dep.Spec.Template.Spec.ServiceAccountName = ""
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, _, _ := newOptions()
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	assertInstalledRBAC(t, fetch(t, c), role, "default")

	// The Deployment's ServiceAccount changed; someone edited our role.
	d, _ := c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	d.Spec.Template.Spec.ServiceAccountName = "coredns"
	c.AppsV1().Deployments("kube-system").Update(ctx, d, metav1.UpdateOptions{})
	r, _ := c.RbacV1().ClusterRoles().Get(ctx, stateName, metav1.GetOptions{})
	r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	c.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{})
	writes(c)
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{"update configmaps/" + stateName, "update clusterroles/" + stateName, "update clusterrolebindings/" + stateName}; !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %q, want %q", got, want)
	}
	assertInstalledRBAC(t, fetch(t, c), role, "coredns")
	if st, _ := c.CoreV1().ConfigMaps("kube-system").Get(ctx, stateName, metav1.GetOptions{}); st.Data["serviceaccount"] != "coredns" {
		t.Errorf("state serviceaccount %q", st.Data["serviceaccount"])
	}

	// A binding to another role: roleRef is immutable.
	b, _ := c.RbacV1().ClusterRoleBindings().Get(ctx, stateName, metav1.GetOptions{})
	b.RoleRef.Name = "view"
	c.RbacV1().ClusterRoleBindings().Update(ctx, b, metav1.UpdateOptions{})
	writes(c)
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, want := writes(c), []string{"delete clusterrolebindings/" + stateName, "create clusterrolebindings/" + stateName}; !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %q, want %q", got, want)
	}
	assertInstalledRBAC(t, fetch(t, c), role, "coredns")
}

// TestInstallRefusesForeignRBAC: a ClusterRole or ClusterRoleBinding of our
// name without our label stops install before any write; uninstall leaves
// one alone.
func TestInstallRefusesForeignRBAC(t *testing.T) {
	for _, foreign := range []runtime.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: stateName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: stateName, Labels: map[string]string{"app.kubernetes.io/name": "coredns-multicluster"}}},
	} {
		kind := strings.ToLower(reflect.TypeOf(foreign).Elem().Name())
		t.Run(kind, func(t *testing.T) {
			cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
			c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy(), foreign.DeepCopyObject())
			o, _, _ := newOptions()
			err := install(context.Background(), c, o)
			if err == nil || !isRefusal(err) || !strings.Contains(err.Error(), kind+".rbac.authorization.k8s.io/"+stateName+" exists without the label") {
				t.Fatalf("install: %v", err)
			}
			if w := writes(c); len(w) != 0 {
				t.Errorf("wrote %q", w)
			}
		})
	}
	t.Run("uninstall", func(t *testing.T) {
		cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
		c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
		o, _, errOut := newOptions()
		ctx := context.Background()
		if err := install(ctx, c, o); err != nil {
			t.Fatal(err)
		}
		r, _ := c.RbacV1().ClusterRoles().Get(ctx, stateName, metav1.GetOptions{})
		r.Labels = nil
		c.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{})
		writes(c)
		if err := uninstall(ctx, c, o); err != nil {
			t.Fatal(err)
		}
		if w := writes(c); slices.Contains(w, "delete clusterroles/"+stateName) || !slices.Contains(w, "delete clusterrolebindings/"+stateName) {
			t.Errorf("uninstall wrote %q", w)
		}
		if !strings.Contains(errOut.String(), "clusterrole.rbac.authorization.k8s.io/"+stateName+" exists without the label") {
			t.Errorf("stderr:\n%s", errOut)
		}
	})
}

// TestOldStateRefused: a state written by the version that edited
// system:coredns is refused by install and uninstall, with what to do.
func TestOldStateRefused(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: stateName, Namespace: "kube-system"}, Data: map[string]string{
		"configmap": "coredns", "key": "Corefile", "deployment": "coredns", "container": "coredns", "clusterrole": "system:coredns",
		"zone": "clusterset.local", "corefile.original": cm.Data["Corefile"], "corefile.installed": cm.Data["Corefile"],
		"image.original": kubeadmImage, "image.installed": ourImage, "rules.original": "[]", "rules.installed": "[]",
	}}
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy(), old)
	o, _, _ := newOptions()
	for name, f := range map[string]func(context.Context, *fake.Clientset, *options) error{
		"install":   func(ctx context.Context, c *fake.Clientset, o *options) error { return install(ctx, c, o) },
		"uninstall": func(ctx context.Context, c *fake.Clientset, o *options) error { return uninstall(ctx, c, o) },
	} {
		err := f(context.Background(), c, o)
		if err == nil || !isRefusal(err) || !strings.Contains(err.Error(), "system:coredns") || !strings.Contains(err.Error(), "by hand") {
			t.Errorf("%s: %v", name, err)
		}
		if w := writes(c); len(w) != 0 {
			t.Errorf("%s wrote %q", name, w)
		}
	}
}

// TestInstallConvertsKubernetesOption: the Cilium set-up (the kubernetes
// plugin's own multicluster option) is converted, and uninstall gives it back.
func TestInstallConvertsKubernetesOption(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/cilium-kubeadm.Corefile")
	// What Cilium's guide adds to system:coredns; install leaves it.
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"list", "watch"}})
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
	o, _, _ := newOptions()
	ctx := context.Background()
	if err := install(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	got := fetch(t, c)
	golden, _ := os.ReadFile("testdata/cilium-kubeadm.golden")
	if got.cm.Data["Corefile"] != string(golden) {
		t.Errorf("Corefile:\n%s", lineDiff(string(golden), got.cm.Data["Corefile"]))
	}
	assertInstalledRBAC(t, got, role, "coredns")
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
	} {
		t.Run(c.name, func(t *testing.T) {
			cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
			cs := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
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
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
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
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
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
		"(dry run) clusterrole.rbac.authorization.k8s.io/" + stateName + ": created (4 rules",
		"(dry run) clusterrolebinding.rbac.authorization.k8s.io/" + stateName + ": created, binds serviceaccount kube-system/coredns",
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
	for _, s := range []string{"-7:     multicluster clusterset.local", "(dry run) clusterrole.rbac.authorization.k8s.io/" + stateName + ": deleted"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestInstallWaitsForRollout: the Corefile is not written while old pods run.
func TestInstallWaitsForRollout(t *testing.T) {
	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	dep.Status.UpdatedReplicas = 1 // never finishes in the fake
	c := newClientset(t, cm.DeepCopy(), dep.DeepCopy(), role.DeepCopy())
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
}

// TestRunImageFlags: install takes exactly one of --image and
// --image-of-pod; both or neither is a usage error, before any kubeconfig.
func TestRunImageFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"install"}, "install needs one of --image IMAGE"},
		{[]string{"install", "--image", ourImage, "--image-of-pod", "in-place-x7k2p"}, "install needs one of --image IMAGE"},
		{[]string{"uninstall", "--image-of-pod", "in-place-x7k2p"}, "flag provided but not defined: -image-of-pod"},
		{[]string{"install", "--clusterrole", "system:coredns", "--image", ourImage}, "flag provided but not defined: -clusterrole"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q, want exit 2 and %q", c.args, code, errOut.String(), c.msg)
		}
	}
}

// TestInstallWaitsForAnswers: with --wait-answers, install returns once every
// ready pod answers the zone at its address, and not before.
func TestInstallWaitsForAnswers(t *testing.T) {
	var asked, answerFrom atomic.Int32
	answerFrom.Store(3) // the pod answers from its third question on, as after a reload
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if n := asked.Add(1); q.Question[0].Name != "dns-version.clusterset.local." || n < answerFrom.Load() {
			m.Rcode = dns.RcodeNameError
		} else {
			m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"1.0.0"}}}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer func() { _ = srv.Shutdown() }()
	port := int32(pc.LocalAddr().(*net.UDPAddr).Port)

	cm, dep, role := kubeadmObjects(t, "testdata/kubeadm.Corefile")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-1", Namespace: "kube-system", Labels: dep.Spec.Selector.MatchLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: port, Protocol: corev1.ProtocolUDP}}}}},
		Status:     corev1.PodStatus{PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	notReady := pod.DeepCopy()
	notReady.Name, notReady.Status.PodIP, notReady.Status.Conditions = "coredns-2", "192.0.2.1", nil // never asked
	c := newClientset(t, cm, dep, role, pod, notReady)
	o, out, _ := newOptions()
	o.waitAnswers, o.wait = true, 30*time.Second
	if err := install(context.Background(), c, o); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n < 3 {
		t.Errorf("install returned after %d questions, before the pod answered", n)
	}
	if !strings.Contains(out.String(), "every ready pod answers clusterset.local") {
		t.Errorf("output:\n%s", out)
	}

	// A pod that never answers: install says which, once --wait is over.
	answerFrom.Store(1 << 30)
	o.wait = 3 * time.Second
	err = waitAnswers(context.Background(), c, o, dep, "clusterset.local.")
	if err == nil || !strings.Contains(err.Error(), "coredns-1") {
		t.Errorf("waitAnswers with a pod that never answers: %v", err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// stateName is the ConfigMap, in the CoreDNS namespace, that keeps what
// uninstall needs: the originals and what install wrote.
const stateName = "coredns-multicluster-in-place"

var stateLabels = map[string]string{
	"app.kubernetes.io/name":       "coredns-multicluster",
	"app.kubernetes.io/component":  "in-place-state",
	"app.kubernetes.io/managed-by": "coredns-multicluster-in-place",
}

// options are the command's flags.
type options struct {
	namespace   string
	configMap   string
	key         string // the ConfigMap key that holds the Corefile
	deployment  string
	container   string
	clusterRole string
	zone        string
	image       string // install only
	force       bool   // uninstall only
	dryRun      bool
	wait        time.Duration // how long to wait for the Deployment's rollout; 0: do not wait
	out, errOut io.Writer
}

// state is the content of the state ConfigMap.
type state struct {
	ConfigMap, Key, Deployment, Container, ClusterRole, Zone string
	CorefileOriginal, CorefileInstalled                      string
	ImageOriginal, ImageInstalled                            string
	RulesOriginal, RulesInstalled                            []rbacv1.PolicyRule
}

func (s *state) toData() (map[string]string, error) {
	ro, err := json.MarshalIndent(s.RulesOriginal, "", "  ")
	if err != nil {
		return nil, err
	}
	ri, err := json.MarshalIndent(s.RulesInstalled, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"configmap":          s.ConfigMap,
		"key":                s.Key,
		"deployment":         s.Deployment,
		"container":          s.Container,
		"clusterrole":        s.ClusterRole,
		"zone":               s.Zone,
		"corefile.original":  s.CorefileOriginal,
		"corefile.installed": s.CorefileInstalled,
		"image.original":     s.ImageOriginal,
		"image.installed":    s.ImageInstalled,
		"rules.original":     string(ro),
		"rules.installed":    string(ri),
	}, nil
}

func stateFromData(d map[string]string) (*state, error) {
	s := &state{
		ConfigMap: d["configmap"], Key: d["key"], Deployment: d["deployment"], Container: d["container"],
		ClusterRole: d["clusterrole"], Zone: d["zone"],
		CorefileOriginal: d["corefile.original"], CorefileInstalled: d["corefile.installed"],
		ImageOriginal: d["image.original"], ImageInstalled: d["image.installed"],
	}
	for _, k := range []string{"configmap", "key", "deployment", "container", "clusterrole", "zone", "corefile.original", "corefile.installed", "image.original", "image.installed", "rules.original", "rules.installed"} {
		if _, ok := d[k]; !ok {
			return nil, fmt.Errorf("configmap/%s lacks the key %q; it was not written by this command", stateName, k)
		}
	}
	if err := json.Unmarshal([]byte(d["rules.original"]), &s.RulesOriginal); err != nil {
		return nil, fmt.Errorf("configmap/%s: rules.original: %w", stateName, err)
	}
	if err := json.Unmarshal([]byte(d["rules.installed"]), &s.RulesInstalled); err != nil {
		return nil, fmt.Errorf("configmap/%s: rules.installed: %w", stateName, err)
	}
	return s, nil
}

// objects are the three objects the command edits.
type objects struct {
	cm   *corev1.ConfigMap
	dep  *appsv1.Deployment
	ci   int // index of the container in dep
	role *rbacv1.ClusterRole
}

func (o *objects) image() string { return o.dep.Spec.Template.Spec.Containers[o.ci].Image }

func get(ctx context.Context, c kubernetes.Interface, ns, cm, dep, container, role string) (*objects, error) {
	var o objects
	var err error
	if o.cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, cm, err)
	}
	if o.dep, err = c.AppsV1().Deployments(ns).Get(ctx, dep, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("deployment %s/%s: %w", ns, dep, err)
	}
	var names []string
	o.ci = -1
	for i, ct := range o.dep.Spec.Template.Spec.Containers {
		names = append(names, ct.Name)
		if ct.Name == container {
			o.ci = i
		}
	}
	if o.ci < 0 {
		return nil, fmt.Errorf("deployment %s/%s has no container %q (it has %s); use --container", ns, dep, container, strings.Join(names, ", "))
	}
	if o.role, err = c.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("clusterrole %s: %w", role, err)
	}
	return &o, nil
}

func getState(ctx context.Context, c kubernetes.Interface, ns string) (*corev1.ConfigMap, *state, error) {
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("configmap %s/%s: %w", ns, stateName, err)
	}
	s, err := stateFromData(cm.Data)
	return cm, s, err
}

type printer struct {
	o *options
}

func (p printer) step(format string, args ...any) {
	prefix := ""
	if p.o.dryRun {
		prefix = "(dry run) "
	}
	fmt.Fprintf(p.o.out, prefix+format+"\n", args...)
}

func (p printer) warn(format string, args ...any) {
	fmt.Fprintf(p.o.errOut, "warning: "+format+"\n", args...)
}

// install adds the multicluster plugin to the cluster's CoreDNS: rules, then
// image, then Corefile, so that each state in between works with the old
// image and the new one. Run again, it sets the image only (and finishes an
// install that was interrupted); the saved originals stay.
func install(ctx context.Context, c kubernetes.Interface, o *options) error {
	p := printer{o}
	if o.image == "" {
		return errors.New("install needs --image")
	}
	fqdn, err := normalizeZone(o.zone)
	if err != nil {
		return err
	}
	stateCM, st, err := getState(ctx, c, o.namespace)
	if err != nil {
		return err
	}
	if st != nil {
		if st.ConfigMap != o.configMap || st.Key != o.key || st.Deployment != o.deployment || st.Container != o.container || st.ClusterRole != o.clusterRole || st.Zone != display(fqdn) {
			return fmt.Errorf("already installed with --configmap %s --deployment %s --container %s --clusterrole %s --zone %s (configmap/%s); use the same flags, or uninstall first",
				st.ConfigMap, st.Deployment, st.Container, st.ClusterRole, st.Zone, stateName)
		}
	}
	obj, err := get(ctx, c, o.namespace, o.configMap, o.deployment, o.container, o.clusterRole)
	if err != nil {
		return err
	}
	if obj.role.AggregationRule != nil {
		return fmt.Errorf("clusterrole %s is aggregated: the controller owns its rules; bind deploy/rbac.yaml's ClusterRole to CoreDNS's ServiceAccount instead", o.clusterRole)
	}
	corefile, ok := obj.cm.Data[o.key]
	if !ok {
		return fmt.Errorf("configmap %s/%s has no key %q; use --key", o.namespace, o.configMap, o.key)
	}

	switch {
	case st == nil:
		if st, err = saveState(ctx, c, o, p, obj, corefile, fqdn); err != nil {
			return err
		}
	case st.ImageInstalled != o.image:
		if err := recordImage(ctx, c, o, p, obj, stateCM, st); err != nil {
			return err
		}
	}
	// The rules, the image, and once the pods run it, the Corefile.
	if err := installRules(ctx, c, o, p, obj, st); err != nil {
		return err
	}
	if obj.image() == o.image {
		p.step("deployment.apps/%s: image unchanged (%s)", o.deployment, o.image)
	} else {
		was := obj.image()
		if err := setImage(ctx, c, o, obj.dep, obj.ci, o.image); err != nil {
			return err
		}
		p.step("deployment.apps/%s: image %s=%s (was %s)", o.deployment, o.container, o.image, was)
	}
	if err := waitRollout(ctx, c, o, p); err != nil {
		return fmt.Errorf("%w; the Corefile is not changed yet: run install again once the pods run", err)
	}
	return installCorefile(ctx, c, o, p, obj, st)
}

// saveState edits the Corefile and saves the originals and what install
// makes of them in the state ConfigMap, first: whatever happens next,
// uninstall can undo it.
func saveState(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, corefile, fqdn string) (*state, error) {
	e, err := editCorefile(corefile, o.zone)
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s, key %s: %w", o.namespace, o.configMap, o.key, err)
	}
	for _, n := range e.notes {
		p.warn("configmap/%s: %s", o.configMap, n)
	}
	if !e.reload {
		p.warn("configmap/%s: the server block %q has no reload plugin: restart CoreDNS after install (kubectl -n %s rollout restart deployment %s)", o.configMap, e.block, o.namespace, o.deployment)
	}
	missing := missingRules(obj.role.Rules, neededRules)
	st := &state{
		ConfigMap: o.configMap, Key: o.key, Deployment: o.deployment, Container: o.container,
		ClusterRole: o.clusterRole, Zone: display(fqdn),
		CorefileOriginal: corefile, CorefileInstalled: e.out,
		ImageOriginal: obj.image(), ImageInstalled: o.image,
		RulesOriginal:  slices.Clone(obj.role.Rules),
		RulesInstalled: append(slices.Clone(obj.role.Rules), missing...),
	}
	data, err := st.toData()
	if err != nil {
		return nil, err
	}
	if !o.dryRun {
		_, err = c.CoreV1().ConfigMaps(o.namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: stateName, Namespace: o.namespace, Labels: stateLabels},
			Data:       data,
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", o.namespace, stateName, err)
		}
	}
	p.step("configmap/%s: saved the original Corefile, image and rules", stateName)
	return st, nil
}

// recordImage records a new image in the state of an install made before.
func recordImage(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, stateCM *corev1.ConfigMap, st *state) error {
	cur := obj.image()
	if cur != st.ImageInstalled && cur != st.ImageOriginal && cur != o.image {
		return fmt.Errorf("deployment %s/%s: container %s runs %s, neither the original %s nor the installed %s: it changed since install (kubeadm upgrade?); run uninstall --force, then install again",
			o.namespace, o.deployment, o.container, cur, st.ImageOriginal, st.ImageInstalled)
	}
	st.ImageInstalled = o.image
	data, err := st.toData()
	if err != nil {
		return err
	}
	if !o.dryRun {
		stateCM.Data = data
		if _, err := c.CoreV1().ConfigMaps(o.namespace).Update(ctx, stateCM, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("configmap %s/%s: %w", o.namespace, stateName, err)
		}
	}
	p.step("configmap/%s: recorded image %s", stateName, o.image)
	return nil
}

// installRules adds the rules the plugin needs to CoreDNS's ClusterRole.
func installRules(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, st *state) error {
	switch {
	case equality.Semantic.DeepEqual(obj.role.Rules, st.RulesInstalled):
		p.step("clusterrole.rbac.authorization.k8s.io/%s: unchanged", o.clusterRole)
	case equality.Semantic.DeepEqual(obj.role.Rules, st.RulesOriginal):
		added := st.RulesInstalled[len(st.RulesOriginal):]
		if !o.dryRun {
			obj.role.Rules = st.RulesInstalled
			if _, err := c.RbacV1().ClusterRoles().Update(ctx, obj.role, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("clusterrole %s: %w", o.clusterRole, err)
			}
		}
		var what []string
		for _, r := range added {
			what = append(what, describeRule(r))
		}
		p.step("clusterrole.rbac.authorization.k8s.io/%s: added %d rules (%s)", o.clusterRole, len(added), strings.Join(what, "; "))
	default:
		p.warn("clusterrole/%s: its rules changed since install; left as they are", o.clusterRole)
	}

	return nil
}

// installCorefile writes the edited Corefile, unless it changed since.
func installCorefile(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, st *state) error {
	cur := obj.cm.Data[o.key]
	switch {
	case cur == st.CorefileInstalled:
		p.step("configmap/%s: Corefile unchanged (has multicluster %s)", o.configMap, st.Zone)
	case cur == st.CorefileOriginal:
		if !o.dryRun {
			obj.cm.Data[o.key] = st.CorefileInstalled
			if _, err := c.CoreV1().ConfigMaps(o.namespace).Update(ctx, obj.cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("configmap %s/%s: %w", o.namespace, o.configMap, err)
			}
		}
		p.step("configmap/%s: Corefile edited (%s)%s", o.configMap, diffStat(st.CorefileOriginal, st.CorefileInstalled), showDiff(o, st.CorefileOriginal, st.CorefileInstalled))
	default:
		p.warn("configmap/%s: the Corefile changed since install; left as it is", o.configMap)
	}
	return nil
}

// restoring decides, for the Corefile, the image and the rules, whether
// uninstall restores the original: each that is what install made is
// restored, each that is the original is kept, and each that is neither
// (changed since install) is refused, or restored with --force.
func restoring(o *options, p printer, obj *objects, st *state, cur string) (corefile, image, rules bool, err error) {
	var conflicts []string
	decide := func(isInstalled, isOriginal bool, what string) bool {
		switch {
		case isOriginal:
			return false
		case isInstalled:
			return true
		}
		conflicts = append(conflicts, what)
		return true
	}
	corefile = decide(cur == st.CorefileInstalled, cur == st.CorefileOriginal,
		fmt.Sprintf("configmap/%s: the Corefile changed since install (it is not what install wrote)", st.ConfigMap))
	image = decide(obj.image() == st.ImageInstalled, obj.image() == st.ImageOriginal,
		fmt.Sprintf("deployment.apps/%s: container %s runs %s, not the installed %s", st.Deployment, st.Container, obj.image(), st.ImageInstalled))
	rules = decide(equality.Semantic.DeepEqual(obj.role.Rules, st.RulesInstalled), equality.Semantic.DeepEqual(obj.role.Rules, st.RulesOriginal),
		fmt.Sprintf("clusterrole.rbac.authorization.k8s.io/%s: its rules changed since install", st.ClusterRole))
	if len(conflicts) > 0 {
		if !o.force {
			return false, false, false, refuse("refusing to uninstall: %s; run uninstall --force to restore the originals anyway (what changed since install is lost)", strings.Join(conflicts, "; "))
		}
		for _, c := range conflicts {
			p.warn("%s; restoring the original anyway (--force)", c)
		}
	}
	return corefile, image, rules, nil
}

// uninstall restores the originals: Corefile, then image, then rules, and
// deletes the state. It refuses when someone changed an object since install,
// unless force.
func uninstall(ctx context.Context, c kubernetes.Interface, o *options) error {
	p := printer{o}
	stateCM, st, err := getState(ctx, c, o.namespace)
	if err != nil {
		return err
	}
	if stateCM == nil {
		p.step("configmap/%s not found in %s: not installed, nothing to do", stateName, o.namespace)
		return nil
	}
	// The names install used, whatever the flags say.
	obj, err := get(ctx, c, o.namespace, st.ConfigMap, st.Deployment, st.Container, st.ClusterRole)
	if err != nil {
		return err
	}
	cur, ok := obj.cm.Data[st.Key]
	if !ok {
		return fmt.Errorf("configmap %s/%s has no key %q", o.namespace, st.ConfigMap, st.Key)
	}

	corefileAct, imageAct, rulesAct, err := restoring(o, p, obj, st, cur)
	if err != nil {
		return err
	}

	// 1. Corefile.
	if corefileAct {
		if !o.dryRun {
			obj.cm.Data[st.Key] = st.CorefileOriginal
			if _, err := c.CoreV1().ConfigMaps(o.namespace).Update(ctx, obj.cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("configmap %s/%s: %w", o.namespace, st.ConfigMap, err)
			}
		}
		p.step("configmap/%s: Corefile restored (%s)%s", st.ConfigMap, diffStat(cur, st.CorefileOriginal), showDiff(o, cur, st.CorefileOriginal))
	} else {
		p.step("configmap/%s: Corefile unchanged (is the original)", st.ConfigMap)
	}

	// 2. Deployment.
	if imageAct {
		was := obj.image()
		oo := *o
		oo.deployment, oo.container = st.Deployment, st.Container
		if err := setImage(ctx, c, &oo, obj.dep, obj.ci, st.ImageOriginal); err != nil {
			return err
		}
		p.step("deployment.apps/%s: image %s=%s (was %s)", st.Deployment, st.Container, st.ImageOriginal, was)
		if err := waitRollout(ctx, c, &oo, p); err != nil {
			return fmt.Errorf("%w; the rules are not restored yet: run uninstall again once the pods run", err)
		}
	} else {
		p.step("deployment.apps/%s: image unchanged (is the original %s)", st.Deployment, st.ImageOriginal)
	}

	// 3. ClusterRole.
	if rulesAct {
		if !o.dryRun {
			obj.role.Rules = st.RulesOriginal
			if _, err := c.RbacV1().ClusterRoles().Update(ctx, obj.role, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("clusterrole %s: %w", st.ClusterRole, err)
			}
		}
		p.step("clusterrole.rbac.authorization.k8s.io/%s: rules restored (%d rules)", st.ClusterRole, len(st.RulesOriginal))
	} else {
		p.step("clusterrole.rbac.authorization.k8s.io/%s: unchanged (has the original rules)", st.ClusterRole)
	}

	// 4. The state, last: until here a second uninstall can finish the job.
	if !o.dryRun {
		if err := c.CoreV1().ConfigMaps(o.namespace).Delete(ctx, stateName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("configmap %s/%s: %w", o.namespace, stateName, err)
		}
	}
	p.step("configmap/%s: deleted", stateName)
	return nil
}

func setImage(ctx context.Context, c kubernetes.Interface, o *options, dep *appsv1.Deployment, ci int, image string) error {
	if o.dryRun {
		return nil
	}
	dep.Spec.Template.Spec.Containers[ci].Image = image
	if _, err := c.AppsV1().Deployments(o.namespace).Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("deployment %s/%s: %w", o.namespace, o.deployment, err)
	}
	return nil
}

// waitRollout waits, as kubectl rollout status does, until every replica
// runs the Deployment's current template.
func waitRollout(ctx context.Context, c kubernetes.Interface, o *options, p printer) error {
	if o.dryRun || o.wait <= 0 {
		return nil
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, o.wait, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(o.namespace).Get(ctx, o.deployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
				return false, fmt.Errorf("deployment %s/%s exceeded its progress deadline", o.namespace, o.deployment)
			}
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		switch {
		case d.Generation > s.ObservedGeneration:
			last = "waiting for the controller to see the new spec"
		case s.UpdatedReplicas < want:
			last = fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
		case s.Replicas > s.UpdatedReplicas:
			last = fmt.Sprintf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
		case s.AvailableReplicas < s.UpdatedReplicas:
			last = fmt.Sprintf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
		default:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		if wait.Interrupted(err) {
			return fmt.Errorf("deployment %s/%s did not roll out within %s (%s)", o.namespace, o.deployment, o.wait, last)
		}
		return err
	}
	p.step("deployment.apps/%s: rolled out", o.deployment)
	return nil
}

// diffStat counts the lines lineDiff shows.
func diffStat(a, b string) string {
	plus, minus := 0, 0
	for _, l := range strings.Split(lineDiff(a, b), "\n") {
		switch {
		case strings.HasPrefix(l, "+"):
			plus++
		case strings.HasPrefix(l, "-"):
			minus++
		}
	}
	return fmt.Sprintf("+%d -%d lines", plus, minus)
}

// showDiff is the line diff, for a dry run.
func showDiff(o *options, a, b string) string {
	if !o.dryRun {
		return ""
	}
	return ":\n" + indent(lineDiff(a, b))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ")
}

// lineDiff shows which lines differ between a and b: "-" for a's, "+" for
// b's, with their line numbers in a and b (a longest common subsequence).
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+%d: %s\n", j+1, y[j])
			j++
		default:
			fmt.Fprintf(&sb, "-%d: %s\n", i+1, x[i])
			i++
		}
	}
	if sb.Len() == 0 {
		return "(no change)\n"
	}
	return sb.String()
}

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
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

	"github.com/miekg/dns"
)

// stateName is the ConfigMap, in CoreDNS's namespace, that keeps what
// uninstall needs under stateKeys: the originals and what install wrote. Our
// ClusterRole and ClusterRoleBinding, which grant CoreDNS the plugin's rules,
// have that name too.
const stateName = "coredns-multicluster-in-place"

var stateKeys = []string{"configmap", "key", "deployment", "container", "zone", "serviceaccount",
	"corefile.original", "corefile.installed", "image.original", "image.installed"}

const managedBy = "app.kubernetes.io/managed-by"

// ourMeta is the metadata of the objects install creates.
func ourMeta(component, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: stateName, Namespace: namespace, Labels: map[string]string{
		"app.kubernetes.io/name": "coredns-multicluster", "app.kubernetes.io/component": component, managedBy: stateName,
	}}
}

// options are the command's flags.
type options struct {
	namespace, configMap, key, deployment, container, zone, kubeconfig, context string

	image, imageOfPod string        // install: the image, or that of this pod's first container
	waitAnswers       bool          // install: wait until every pod answers the zone
	force             bool          // uninstall
	dryRun            bool          // change nothing
	wait              time.Duration // for each rollout; 0: do not wait
	out, errOut       io.Writer
}

func (o *options) step(format string, args ...any) {
	if o.dryRun {
		format = "(dry run) " + format
	}
	fmt.Fprintf(o.out, format+"\n", args...)
}

func (o *options) warn(format string, args ...any) {
	fmt.Fprintf(o.errOut, "warning: "+format+"\n", args...)
}

// change makes one change to the cluster, unless in a dry run, then says it
// as a step; its error names what it changes.
func (o *options) change(what string, do func() error, format string, args ...any) error {
	if !o.dryRun {
		if err := do(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	o.step(format, args...)
	return nil
}

// result is the error of a client call's results, for change.
func result(_ any, err error) error { return err }

// gone is err but for NotFound: a deletion may find the object gone.
func gone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// objects are the objects of CoreDNS the command edits.
type objects struct {
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
	ct  *corev1.Container // CoreDNS's, in dep
}

// get reads the ConfigMap and Deployment of CoreDNS that opts name; hint is
// what the error of a missing key suggests.
func get(ctx context.Context, c kubernetes.Interface, opts *options, hint string) (*objects, error) {
	ns := opts.namespace
	var o objects
	var err error
	if o.cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, opts.configMap, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, opts.configMap, err)
	}
	if o.dep, err = c.AppsV1().Deployments(ns).Get(ctx, opts.deployment, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("deployment %s/%s: %w", ns, opts.deployment, err)
	}
	var names []string
	for i, ct := range o.dep.Spec.Template.Spec.Containers {
		if names = append(names, ct.Name); ct.Name == opts.container {
			o.ct = &o.dep.Spec.Template.Spec.Containers[i]
		}
	}
	if o.ct == nil {
		return nil, fmt.Errorf("deployment %s/%s has no container %q (it has %s); use --container", ns, opts.deployment, opts.container, strings.Join(names, ", "))
	}
	if _, ok := o.cm.Data[opts.key]; !ok {
		return nil, fmt.Errorf("configmap %s/%s has no key %q%s", ns, opts.configMap, opts.key, hint)
	}
	return &o, nil
}

// getState reads the state ConfigMap; one without data when not installed.
func getState(ctx context.Context, c kubernetes.Interface, ns string) (*corev1.ConfigMap, error) {
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &corev1.ConfigMap{ObjectMeta: ourMeta("in-place-state", ns)}, nil
	} else if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, stateName, err)
	}
	_, oldRules := cm.Data["rules.original"]
	if _, ok := cm.Data["serviceaccount"]; !ok && oldRules {
		return nil, refuse("configmap/%s was written by an older in-place, which added the plugin's rules to CoreDNS's ClusterRole (system:coredns): restore that ClusterRole's rules by hand (they are in the key rules.original) or uninstall with that older version, then delete configmap/%s", stateName, stateName)
	}
	for _, k := range stateKeys {
		if _, ok := cm.Data[k]; !ok {
			return nil, fmt.Errorf("configmap/%s lacks the key %q; it was not written by this command", stateName, k)
		}
	}
	return cm, nil
}

// ours gets our ClusterRole or ClusterRoleBinding: nil when not found or
// without our label, then refused with mustBeOurs, else left with a warning.
func ours[T metav1.Object](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error), kind string, o *options, mustBeOurs bool) (T, error) {
	var none T
	obj, err := get(ctx, stateName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return none, nil
	} else if err != nil {
		return none, fmt.Errorf("%s %s: %w", kind, stateName, err)
	}
	if obj.GetLabels()[managedBy] == stateName {
		return obj, nil
	}
	msg := fmt.Sprintf("%s.rbac.authorization.k8s.io/%s exists without the label %s=%s: it is not ours", kind, stateName, managedBy, stateName)
	if mustBeOurs {
		return none, refuse("%s; delete or rename it first", msg)
	}
	o.warn("%s; left as it is", msg)
	return none, nil
}

// install does what usage says, in that order so that each state in between
// works with the old image and the new one. Run again, it finishes an
// install that was interrupted; the saved originals stay.
func install(ctx context.Context, c kubernetes.Interface, o *options) error {
	if o.imageOfPod != "" {
		pod, err := c.CoreV1().Pods(o.namespace).Get(ctx, o.imageOfPod, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", o.namespace, o.imageOfPod, err)
		}
		if len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Image == "" {
			return fmt.Errorf("pod %s/%s has no container with an image", o.namespace, o.imageOfPod)
		}
		oo := *o
		o, oo.image = &oo, pod.Spec.Containers[0].Image
		o.step("pod/%s: image %s", o.imageOfPod, o.image)
	}
	if o.image == "" {
		return errors.New("install needs --image or --image-of-pod")
	}
	fqdn, err := normalizeZone(o.zone)
	if err != nil {
		return err
	}
	state, err := getState(ctx, c, o.namespace)
	if err != nil {
		return err
	}
	st := state.Data
	if st != nil && (st["configmap"] != o.configMap || st["key"] != o.key || st["deployment"] != o.deployment || st["container"] != o.container || st["zone"] != display(fqdn)) {
		return fmt.Errorf("already installed with --configmap %s --key %s --deployment %s --container %s --zone %s (configmap/%s); use the same flags, or uninstall first",
			st["configmap"], st["key"], st["deployment"], st["container"], st["zone"], stateName)
	}
	obj, err := get(ctx, c, o, "; use --key")
	if err != nil {
		return err
	}
	role, err := ours(ctx, c.RbacV1().ClusterRoles().Get, "clusterrole", o, true)
	if err != nil {
		return err
	}
	binding, err := ours(ctx, c.RbacV1().ClusterRoleBindings().Get, "clusterrolebinding", o, true)
	if err != nil {
		return err
	}
	sa, what, cms := cmp.Or(obj.dep.Spec.Template.Spec.ServiceAccountName, "default"), "configmap "+o.namespace+"/"+stateName, c.CoreV1().ConfigMaps(o.namespace)
	switch {
	case st == nil:
		// The edit and the originals are saved first: whatever happens
		// next, uninstall can undo it.
		e, err := editCorefile(obj.cm.Data[o.key], o.zone)
		if err != nil {
			return fmt.Errorf("configmap %s/%s, key %s: %w", o.namespace, o.configMap, o.key, err)
		}
		for _, n := range e.notes {
			o.warn("configmap/%s: %s", o.configMap, n)
		}
		if !e.reload {
			o.warn("configmap/%s: the server block %q has no reload plugin: restart CoreDNS after install (kubectl -n %s rollout restart deployment %s)", o.configMap, e.block, o.namespace, o.deployment)
		}
		st = map[string]string{
			"configmap": o.configMap, "key": o.key, "deployment": o.deployment, "container": o.container,
			"zone": display(fqdn), "serviceaccount": sa,
			"corefile.original": obj.cm.Data[o.key], "corefile.installed": e.out,
			"image.original": obj.ct.Image, "image.installed": o.image,
		}
		state.Data = st
		err = o.change(what, func() error { return result(cms.Create(ctx, state, metav1.CreateOptions{})) },
			"configmap/%s: saved the original Corefile and image", stateName)
	case st["image.installed"] != o.image || st["serviceaccount"] != sa:
		if cur := obj.ct.Image; cur != st["image.installed"] && cur != st["image.original"] && cur != o.image {
			return fmt.Errorf("deployment %s/%s: container %s runs %s, neither the original %s nor the installed %s: it changed since install (kubeadm upgrade?); run uninstall --force, then install again",
				o.namespace, o.deployment, o.container, cur, st["image.original"], st["image.installed"])
		}
		st["image.installed"], st["serviceaccount"] = o.image, sa
		err = o.change(what, func() error { return result(cms.Update(ctx, state, metav1.UpdateOptions{})) },
			"configmap/%s: recorded image %s, serviceaccount %s", stateName, o.image, sa)
	}
	if err != nil {
		return err
	}
	if err := installRBAC(ctx, c, o, role, binding, sa); err != nil {
		return err
	}
	if obj.ct.Image == o.image {
		o.step("deployment.apps/%s: image unchanged (%s)", o.deployment, o.image)
	} else if err := setImage(ctx, c, o, obj, o.image); err != nil {
		return err
	}
	if err := waitRollout(ctx, c, o); err != nil {
		return fmt.Errorf("%w; the Corefile is not changed yet: run install again once the pods run", err)
	}
	switch obj.cm.Data[o.key] {
	case st["corefile.installed"]:
		o.step("configmap/%s: Corefile unchanged (has multicluster %s)", o.configMap, st["zone"])
	case st["corefile.original"]:
		if err := setCorefile(ctx, c, o, obj, st["corefile.original"], st["corefile.installed"], "edited"); err != nil {
			return err
		}
	default:
		o.warn("configmap/%s: the Corefile changed since install; left as it is", o.configMap)
	}
	return waitAnswers(ctx, c, o, obj.dep, fqdn)
}

// installRBAC makes our ClusterRole hold exactly the plugin's rules and our
// ClusterRoleBinding bind it to sa.
func installRBAC(ctx context.Context, c kubernetes.Interface, o *options, role *rbacv1.ClusterRole, binding *rbacv1.ClusterRoleBinding, sa string) error {
	const roleKind, bindingKind = "clusterrole.rbac.authorization.k8s.io/" + stateName, "clusterrolebinding.rbac.authorization.k8s.io/" + stateName
	roles, bindings := c.RbacV1().ClusterRoles(), c.RbacV1().ClusterRoleBindings()
	var err error
	switch {
	case role == nil:
		role = &rbacv1.ClusterRole{ObjectMeta: ourMeta("in-place-rbac", ""), Rules: neededRules}
		err = o.change("clusterrole "+stateName, func() error { return result(roles.Create(ctx, role, metav1.CreateOptions{})) },
			"%s: created (%d rules, those of deploy/rbac.yaml)", roleKind, len(neededRules))
	case role.AggregationRule == nil && equality.Semantic.DeepEqual(role.Rules, neededRules):
		o.step("%s: unchanged", roleKind)
	default:
		role.Rules, role.AggregationRule = neededRules, nil
		err = o.change("clusterrole "+stateName, func() error { return result(roles.Update(ctx, role, metav1.UpdateOptions{})) },
			"%s: rules set to those of deploy/rbac.yaml", roleKind)
	}
	if err != nil {
		return err
	}
	want := &rbacv1.ClusterRoleBinding{
		ObjectMeta: ourMeta("in-place-rbac", ""),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: stateName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: o.namespace}},
	}
	what, binds := "clusterrolebinding "+stateName, "binds serviceaccount "+o.namespace+"/"+sa
	create := func() error { return result(bindings.Create(ctx, want, metav1.CreateOptions{})) }
	switch {
	case binding == nil:
		return o.change(what, create, "%s: created, %s", bindingKind, binds)
	case binding.RoleRef != want.RoleRef:
		// The roleRef is immutable: delete, then create.
		return o.change(what, func() error {
			if err := gone(bindings.Delete(ctx, stateName, metav1.DeleteOptions{})); err != nil {
				return err
			}
			return create()
		}, "%s: recreated (it referred to another role), %s", bindingKind, binds)
	case equality.Semantic.DeepEqual(binding.Subjects, want.Subjects):
		o.step("%s: unchanged (%s)", bindingKind, binds)
		return nil
	}
	binding.Subjects = want.Subjects
	return o.change(what, func() error { return result(bindings.Update(ctx, binding, metav1.UpdateOptions{})) }, "%s: now %s", bindingKind, binds)
}

// uninstall does what usage says; the state goes last, so that until then
// uninstall can run again.
func uninstall(ctx context.Context, c kubernetes.Interface, o *options) error {
	state, err := getState(ctx, c, o.namespace)
	if err != nil {
		return err
	}
	if state.Data == nil {
		o.step("configmap/%s not found in %s: not installed, nothing to do", stateName, o.namespace)
		return nil
	}
	// The names install used, whatever the flags say.
	st, oo := state.Data, *o
	o = &oo
	o.configMap, o.key, o.deployment, o.container = st["configmap"], st["key"], st["deployment"], st["container"]
	obj, err := get(ctx, c, o, "")
	if err != nil {
		return err
	}
	cur := obj.cm.Data[o.key]
	var conflicts []string
	if cur != st["corefile.installed"] && cur != st["corefile.original"] {
		conflicts = append(conflicts, fmt.Sprintf("configmap/%s: the Corefile changed since install (it is not what install wrote)", o.configMap))
	}
	if img := obj.ct.Image; img != st["image.installed"] && img != st["image.original"] {
		conflicts = append(conflicts, fmt.Sprintf("deployment.apps/%s: container %s runs %s, not the installed %s", o.deployment, o.container, img, st["image.installed"]))
	}
	if len(conflicts) > 0 && !o.force {
		return refuse("refusing to uninstall: %s; run uninstall --force to restore the originals anyway (what changed since install is lost)", strings.Join(conflicts, "; "))
	}
	for _, c := range conflicts {
		o.warn("%s; restoring the original anyway (--force)", c)
	}

	if cur == st["corefile.original"] {
		o.step("configmap/%s: Corefile unchanged (is the original)", o.configMap)
	} else if err := setCorefile(ctx, c, o, obj, cur, st["corefile.original"], "restored"); err != nil {
		return err
	}
	if obj.ct.Image == st["image.original"] {
		o.step("deployment.apps/%s: image unchanged (is the original %s)", o.deployment, st["image.original"])
	} else if err := setImage(ctx, c, o, obj, st["image.original"]); err != nil {
		return err
	} else if err := waitRollout(ctx, c, o); err != nil {
		return fmt.Errorf("%w; the ClusterRole %s is not deleted yet: run uninstall again once the pods run", err, stateName)
	}

	// Our ClusterRoleBinding and ClusterRole; one not ours is left.
	role, err := ours(ctx, c.RbacV1().ClusterRoles().Get, "clusterrole", o, false)
	if err != nil {
		return err
	}
	binding, err := ours(ctx, c.RbacV1().ClusterRoleBindings().Get, "clusterrolebinding", o, false)
	if err != nil {
		return err
	}
	del := func(kind string, f func(context.Context, string, metav1.DeleteOptions) error) error {
		return o.change(kind+" "+stateName, func() error { return gone(f(ctx, stateName, metav1.DeleteOptions{})) }, "%s.rbac.authorization.k8s.io/%s: deleted", kind, stateName)
	}
	if binding != nil {
		err = del("clusterrolebinding", c.RbacV1().ClusterRoleBindings().Delete)
	}
	if role != nil && err == nil {
		err = del("clusterrole", c.RbacV1().ClusterRoles().Delete)
	}
	if err != nil {
		return err
	}
	return o.change("configmap "+o.namespace+"/"+stateName, func() error {
		return gone(c.CoreV1().ConfigMaps(o.namespace).Delete(ctx, stateName, metav1.DeleteOptions{}))
	}, "configmap/%s: deleted", stateName)
}

// setCorefile writes to over from, the Corefile now, and counts the lines
// that differ; a dry run shows them.
func setCorefile(ctx context.Context, c kubernetes.Interface, o *options, obj *objects, from, to, done string) error {
	d := lineDiff(from, to)
	note := fmt.Sprintf("(+%d -%d lines)", strings.Count("\n"+d, "\n+"), strings.Count("\n"+d, "\n-"))
	if o.dryRun {
		note += ":\n    " + strings.ReplaceAll(strings.TrimSuffix(d, "\n"), "\n", "\n    ")
	}
	return o.change("configmap "+o.namespace+"/"+o.configMap, func() error {
		obj.cm.Data[o.key] = to
		return result(c.CoreV1().ConfigMaps(o.namespace).Update(ctx, obj.cm, metav1.UpdateOptions{}))
	}, "configmap/%s: Corefile %s %s", o.configMap, done, note)
}

func setImage(ctx context.Context, c kubernetes.Interface, o *options, obj *objects, image string) error {
	was := obj.ct.Image
	return o.change("deployment "+o.namespace+"/"+o.deployment, func() error {
		obj.ct.Image = image
		return result(c.AppsV1().Deployments(o.namespace).Update(ctx, obj.dep, metav1.UpdateOptions{}))
	}, "deployment.apps/%s: image %s=%s (was %s)", o.deployment, o.container, image, was)
}

// poll asks check every 2 s, for at most --wait, until it gives no reason to
// wait longer, then says done; else the error says what did not happen in
// time, and why. A dry run or --wait 0 does not wait.
func poll(ctx context.Context, o *options, what, done string, check func(context.Context) (string, error)) error {
	if o.dryRun || o.wait <= 0 {
		return nil
	}
	var why string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, o.wait, true, func(ctx context.Context) (bool, error) {
		w, err := check(ctx)
		why = cmp.Or(w, why)
		return w == "" && err == nil, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s within %s (%s)", what, o.wait, why)
	} else if err == nil {
		o.step("%s", done)
	}
	return err
}

// waitRollout waits as kubectl rollout status does.
func waitRollout(ctx context.Context, c kubernetes.Interface, o *options) error {
	return poll(ctx, o, fmt.Sprintf("deployment %s/%s did not roll out", o.namespace, o.deployment), "deployment.apps/"+o.deployment+": rolled out", func(ctx context.Context) (string, error) {
		d, err := c.AppsV1().Deployments(o.namespace).Get(ctx, o.deployment, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
				return "", fmt.Errorf("deployment %s/%s exceeded its progress deadline", o.namespace, o.deployment)
			}
		}
		want, s := int32(1), d.Status
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		switch {
		case d.Generation > s.ObservedGeneration:
			return "waiting for the controller to see the new spec", nil
		case s.UpdatedReplicas < want:
			return fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want), nil
		case s.Replicas > s.UpdatedReplicas:
			return fmt.Sprintf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas), nil
		case s.AvailableReplicas < s.UpdatedReplicas:
			return fmt.Sprintf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas), nil
		}
		return "", nil
	})
}

// waitAnswers waits until every ready pod answers the zone (dns-version TXT
// at the pod's address): until the kubelet has refreshed each pod's Corefile
// and reload has read it, about 90 s, one replica may answer and another
// not. Pod addresses are reachable in the cluster, where the Job runs.
func waitAnswers(ctx context.Context, c kubernetes.Interface, o *options, dep *appsv1.Deployment, fqdn string) error {
	if !o.waitAnswers || o.dryRun || o.wait <= 0 {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", o.namespace, o.deployment, err)
	}
	q := new(dns.Msg)
	q.SetQuestion("dns-version."+fqdn, dns.TypeTXT)
	client := &dns.Client{Timeout: 2 * time.Second}
	what := fmt.Sprintf("the pods of deployment %s/%s did not all answer %s", o.namespace, o.deployment, display(fqdn))
	return poll(ctx, o, what, "deployment.apps/"+o.deployment+": every ready pod answers "+display(fqdn), func(ctx context.Context) (string, error) {
		pods, err := c.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return "", err
		}
		asked := 0
		for _, pod := range pods.Items {
			ready := slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue })
			if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || !ready {
				continue
			}
			asked++
			// The container's UDP port named "dns" (kubeadm's, the chart's), else 53.
			port := int32(53)
			for _, ct := range pod.Spec.Containers {
				if i := slices.IndexFunc(ct.Ports, func(p corev1.ContainerPort) bool { return p.Name == "dns" && p.Protocol != corev1.ProtocolTCP }); i >= 0 && ct.Name == o.container {
					port = ct.Ports[i].ContainerPort
				}
			}
			addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
			r, _, err := client.ExchangeContext(ctx, q, addr)
			switch {
			case err != nil:
				return fmt.Sprintf("pod %s (%s): %v", pod.Name, addr, err), nil
			case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
				return fmt.Sprintf("pod %s (%s) does not answer the zone yet (%s)", pod.Name, addr, dns.RcodeToString[r.Rcode]), nil
			}
		}
		if asked == 0 {
			return "no ready pod", nil
		}
		return "", nil
	})
}

// lineDiff shows the lines of a ("-") and b ("+") outside their longest
// common subsequence, with their line numbers.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	lcs := make([][]int, len(x)+1)
	for i := len(x); i >= 0; i-- {
		lcs[i] = make([]int, len(y)+1)
		for j := len(y) - 1; i < len(x) && j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	for i, j := 0, 0; i < len(x) || j < len(y); {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+%d: %s\n", j+1, y[j])
			j++
		default:
			fmt.Fprintf(&sb, "-%d: %s\n", i+1, x[i])
			i++
		}
	}
	return cmp.Or(sb.String(), "(no change)\n")
}

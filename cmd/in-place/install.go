package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

// stateName is the ConfigMap, in the CoreDNS namespace, that keeps what
// uninstall needs: the originals and what install wrote. The ClusterRole and
// ClusterRoleBinding that grant CoreDNS the plugin's rules have that name too.
const stateName = "coredns-multicluster-in-place"

const managedBy = "app.kubernetes.io/managed-by"

// ourLabels are the labels of the objects install creates.
func ourLabels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "coredns-multicluster",
		"app.kubernetes.io/component": component,
		managedBy:                     stateName,
	}
}

// options are the command's flags.
type options struct {
	namespace   string
	configMap   string
	key         string // the ConfigMap key that holds the Corefile
	deployment  string
	container   string
	zone        string
	image       string // install only
	imageOfPod  string // install only: take image from this pod's first container
	force       bool   // uninstall only
	dryRun      bool
	wait        time.Duration // how long to wait for the Deployment's rollout; 0: do not wait
	waitAnswers bool          // install: wait until every pod answers the zone
	out, errOut io.Writer
}

// state is the content of the state ConfigMap.
type state struct {
	ConfigMap, Key, Deployment, Container, Zone string
	ServiceAccount                              string // bound to the ClusterRole
	CorefileOriginal, CorefileInstalled         string
	ImageOriginal, ImageInstalled               string
}

// fields are the state's fields under their keys in the ConfigMap.
func (s *state) fields() map[string]*string {
	return map[string]*string{
		"configmap": &s.ConfigMap, "key": &s.Key, "deployment": &s.Deployment, "container": &s.Container,
		"zone": &s.Zone, "serviceaccount": &s.ServiceAccount,
		"corefile.original": &s.CorefileOriginal, "corefile.installed": &s.CorefileInstalled,
		"image.original": &s.ImageOriginal, "image.installed": &s.ImageInstalled,
	}
}

func (s *state) toData() map[string]string {
	d := map[string]string{}
	for k, v := range s.fields() {
		d[k] = *v
	}
	return d
}

func stateFromData(d map[string]string) (*state, error) {
	_, oldRules := d["rules.original"]
	if _, ok := d["serviceaccount"]; !ok && oldRules {
		return nil, refuse("configmap/%s was written by an older in-place, which added the plugin's rules to CoreDNS's ClusterRole (system:coredns): restore that ClusterRole's rules by hand (they are in the key rules.original) or uninstall with that older version, then delete configmap/%s", stateName, stateName)
	}
	s := &state{}
	for k, v := range s.fields() {
		var ok bool
		if *v, ok = d[k]; !ok {
			return nil, fmt.Errorf("configmap/%s lacks the key %q; it was not written by this command", stateName, k)
		}
	}
	return s, nil
}

// objects are the objects of CoreDNS the command edits.
type objects struct {
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
	ci  int // index of the container in dep
}

func (o *objects) image() string { return o.dep.Spec.Template.Spec.Containers[o.ci].Image }

// serviceAccount is the ServiceAccount CoreDNS's pods run as.
func (o *objects) serviceAccount() string {
	if sa := o.dep.Spec.Template.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	return "default"
}

// get reads the ConfigMap and Deployment of CoreDNS that opts name, and the
// Corefile; hint is what the error of a missing key suggests.
func get(ctx context.Context, c kubernetes.Interface, opts *options, hint string) (*objects, string, error) {
	ns := opts.namespace
	var o objects
	var err error
	if o.cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, opts.configMap, metav1.GetOptions{}); err != nil {
		return nil, "", fmt.Errorf("configmap %s/%s: %w", ns, opts.configMap, err)
	}
	if o.dep, err = c.AppsV1().Deployments(ns).Get(ctx, opts.deployment, metav1.GetOptions{}); err != nil {
		return nil, "", fmt.Errorf("deployment %s/%s: %w", ns, opts.deployment, err)
	}
	var names []string
	o.ci = -1
	for i, ct := range o.dep.Spec.Template.Spec.Containers {
		names = append(names, ct.Name)
		if ct.Name == opts.container {
			o.ci = i
		}
	}
	if o.ci < 0 {
		return nil, "", fmt.Errorf("deployment %s/%s has no container %q (it has %s); use --container", ns, opts.deployment, opts.container, strings.Join(names, ", "))
	}
	corefile, ok := o.cm.Data[opts.key]
	if !ok {
		return nil, "", fmt.Errorf("configmap %s/%s has no key %q%s", ns, opts.configMap, opts.key, hint)
	}
	return &o, corefile, nil
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

// rbac are our ClusterRole and ClusterRoleBinding, nil where not found.
type rbac struct {
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
}

// getRBAC reads our ClusterRole and ClusterRoleBinding.
func getRBAC(ctx context.Context, c kubernetes.Interface, p printer, mustBeOurs bool) (r rbac, err error) {
	role, err := c.RbacV1().ClusterRoles().Get(ctx, stateName, metav1.GetOptions{})
	if r.role, err = ours(role, err, "clusterrole", p, mustBeOurs); err != nil {
		return r, err
	}
	binding, err := c.RbacV1().ClusterRoleBindings().Get(ctx, stateName, metav1.GetOptions{})
	r.binding, err = ours(binding, err, "clusterrolebinding", p, mustBeOurs)
	return r, err
}

// ours is obj, what a Get of one of our objects returned with err, or nil
// when it is not found or not ours (without our managed-by label): then
// refused with mustBeOurs, else left out with a warning.
func ours[T metav1.Object](obj T, err error, kind string, p printer, mustBeOurs bool) (T, error) {
	var none T
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
	p.warn("%s; left as it is", msg)
	return none, nil
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

// write makes one change to the cluster, unless in a dry run; its error
// names what it changes.
func (o *options) write(what string, change func() error) error {
	if o.dryRun {
		return nil
	}
	if err := change(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// result is the error of a call's results, for write.
func result(_ any, err error) error { return err }

// gone is err but for NotFound: a deletion finds the object gone.
func gone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// install adds the multicluster plugin to the cluster's CoreDNS: the rules
// (a ClusterRole and ClusterRoleBinding of our own, which kubeadm upgrade
// leaves alone), then the image, then the Corefile, so that each state in
// between works with the old image and the new one. Run again, it sets the
// image and the binding's subject only (and finishes an install that was
// interrupted); the saved originals stay.
func install(ctx context.Context, c kubernetes.Interface, o *options) error {
	p := printer{o}
	if o.imageOfPod != "" {
		pod, err := c.CoreV1().Pods(o.namespace).Get(ctx, o.imageOfPod, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", o.namespace, o.imageOfPod, err)
		}
		if len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Image == "" {
			return fmt.Errorf("pod %s/%s has no container with an image", o.namespace, o.imageOfPod)
		}
		oo := *o
		oo.image = pod.Spec.Containers[0].Image
		o, p = &oo, printer{&oo}
		p.step("pod/%s: image %s", o.imageOfPod, o.image)
	}
	if o.image == "" {
		return errors.New("install needs --image or --image-of-pod")
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
		if st.ConfigMap != o.configMap || st.Key != o.key || st.Deployment != o.deployment || st.Container != o.container || st.Zone != display(fqdn) {
			return fmt.Errorf("already installed with --configmap %s --key %s --deployment %s --container %s --zone %s (configmap/%s); use the same flags, or uninstall first",
				st.ConfigMap, st.Key, st.Deployment, st.Container, st.Zone, stateName)
		}
	}
	obj, corefile, err := get(ctx, c, o, "; use --key")
	if err != nil {
		return err
	}
	r, err := getRBAC(ctx, c, p, true)
	if err != nil {
		return err
	}

	switch {
	case st == nil:
		if st, err = saveState(ctx, c, o, p, obj, corefile, fqdn); err != nil {
			return err
		}
	case st.ImageInstalled != o.image || st.ServiceAccount != obj.serviceAccount():
		if err := updateState(ctx, c, o, p, obj, stateCM, st); err != nil {
			return err
		}
	}
	// The rules, the image, and once the pods run it, the Corefile.
	if err := installRBAC(ctx, c, o, p, r, obj.serviceAccount()); err != nil {
		return err
	}
	if obj.image() == o.image {
		p.step("deployment.apps/%s: image unchanged (%s)", o.deployment, o.image)
	} else if err := setImage(ctx, c, o, p, obj, o.image); err != nil {
		return err
	}
	if err := waitRollout(ctx, c, o, p); err != nil {
		return fmt.Errorf("%w; the Corefile is not changed yet: run install again once the pods run", err)
	}
	if err := installCorefile(ctx, c, o, p, obj, st); err != nil {
		return err
	}
	return waitAnswers(ctx, c, o, p, obj.dep, fqdn)
}

// waitAnswers waits, with --wait-answers, until every ready pod of the
// Deployment answers the zone (dns-version.<zone> TXT, asked at the pod's
// address): until the kubelet has refreshed each pod's Corefile and reload
// has read it, about 90 s, one replica may answer the zone and another not.
// Only where pod addresses are reachable: in the cluster, as the Job runs.
func waitAnswers(ctx context.Context, c kubernetes.Interface, o *options, p printer, dep *appsv1.Deployment, fqdn string) error {
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
	err = poll(ctx, o, fmt.Sprintf("the pods of deployment %s/%s did not all answer %s", o.namespace, o.deployment, display(fqdn)), func(ctx context.Context) (string, error) {
		pods, err := c.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return "", err
		}
		ready := 0
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || !podReady(&pod) {
				continue
			}
			ready++
			addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(dnsPort(&pod, o.container)))
			r, _, err := client.ExchangeContext(ctx, q, addr)
			switch {
			case err != nil:
				return fmt.Sprintf("pod %s (%s): %v", pod.Name, addr, err), nil
			case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
				return fmt.Sprintf("pod %s (%s) does not answer the zone yet (%s)", pod.Name, addr, dns.RcodeToString[r.Rcode]), nil
			}
		}
		if ready == 0 {
			return "no ready pod", nil
		}
		return "", nil
	})
	if err != nil {
		return err
	}
	p.step("deployment.apps/%s: every ready pod answers %s", o.deployment, display(fqdn))
	return nil
}

// poll asks check every 2 s, for at most --wait, until it gives no reason to
// wait longer; then the error says what did not happen in time, and why.
func poll(ctx context.Context, o *options, what string, check func(context.Context) (string, error)) error {
	var why string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, o.wait, true, func(ctx context.Context) (bool, error) {
		w, err := check(ctx)
		why = cmp.Or(w, why)
		return w == "" && err == nil, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s within %s (%s)", what, o.wait, why)
	}
	return err
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// dnsPort is the container's UDP port named "dns" (kubeadm's, the chart's),
// else 53.
func dnsPort(pod *corev1.Pod, container string) int {
	for _, ct := range pod.Spec.Containers {
		for _, port := range ct.Ports {
			if ct.Name == container && port.Name == "dns" && port.Protocol != corev1.ProtocolTCP {
				return int(port.ContainerPort)
			}
		}
	}
	return 53
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
	st := &state{
		ConfigMap: o.configMap, Key: o.key, Deployment: o.deployment, Container: o.container,
		Zone: display(fqdn), ServiceAccount: obj.serviceAccount(),
		CorefileOriginal: corefile, CorefileInstalled: e.out,
		ImageOriginal: obj.image(), ImageInstalled: o.image,
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: stateName, Namespace: o.namespace, Labels: ourLabels("in-place-state")},
		Data:       st.toData(),
	}
	if err := o.write("configmap "+o.namespace+"/"+stateName, func() error {
		return result(c.CoreV1().ConfigMaps(o.namespace).Create(ctx, cm, metav1.CreateOptions{}))
	}); err != nil {
		return nil, err
	}
	p.step("configmap/%s: saved the original Corefile and image", stateName)
	return st, nil
}

// updateState records a new image and ServiceAccount in the state of an
// install made before.
func updateState(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, stateCM *corev1.ConfigMap, st *state) error {
	cur := obj.image()
	if cur != st.ImageInstalled && cur != st.ImageOriginal && cur != o.image {
		return fmt.Errorf("deployment %s/%s: container %s runs %s, neither the original %s nor the installed %s: it changed since install (kubeadm upgrade?); run uninstall --force, then install again",
			o.namespace, o.deployment, o.container, cur, st.ImageOriginal, st.ImageInstalled)
	}
	st.ImageInstalled, st.ServiceAccount = o.image, obj.serviceAccount()
	if err := o.write("configmap "+o.namespace+"/"+stateName, func() error {
		stateCM.Data = st.toData()
		return result(c.CoreV1().ConfigMaps(o.namespace).Update(ctx, stateCM, metav1.UpdateOptions{}))
	}); err != nil {
		return err
	}
	p.step("configmap/%s: recorded image %s, serviceaccount %s", stateName, o.image, st.ServiceAccount)
	return nil
}

// installRBAC makes our ClusterRole hold exactly the rules the plugin needs
// and our ClusterRoleBinding bind it to CoreDNS's ServiceAccount sa.
func installRBAC(ctx context.Context, c kubernetes.Interface, o *options, p printer, r rbac, sa string) error {
	const roleKind, bindingKind = "clusterrole.rbac.authorization.k8s.io/" + stateName, "clusterrolebinding.rbac.authorization.k8s.io/" + stateName
	roles, bindings := c.RbacV1().ClusterRoles(), c.RbacV1().ClusterRoleBindings()
	switch {
	case r.role == nil:
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: stateName, Labels: ourLabels("in-place-rbac")}, Rules: neededRules}
		if err := o.write("clusterrole "+stateName, func() error { return result(roles.Create(ctx, role, metav1.CreateOptions{})) }); err != nil {
			return err
		}
		p.step("%s: created (%d rules, those of deploy/rbac.yaml)", roleKind, len(neededRules))
	case r.role.AggregationRule == nil && equality.Semantic.DeepEqual(r.role.Rules, neededRules):
		p.step("%s: unchanged", roleKind)
	default:
		if err := o.write("clusterrole "+stateName, func() error {
			r.role.Rules, r.role.AggregationRule = neededRules, nil
			return result(roles.Update(ctx, r.role, metav1.UpdateOptions{}))
		}); err != nil {
			return err
		}
		p.step("%s: rules set to those of deploy/rbac.yaml", roleKind)
	}

	want := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: stateName, Labels: ourLabels("in-place-rbac")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: stateName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: o.namespace}},
	}
	what, done := "clusterrolebinding "+stateName, "created"
	switch {
	case r.binding == nil:
	case r.binding.RoleRef != want.RoleRef:
		// The roleRef is immutable: delete, then create.
		if err := o.write(what, func() error { return gone(bindings.Delete(ctx, stateName, metav1.DeleteOptions{})) }); err != nil {
			return err
		}
		done = "recreated (it referred to another role)"
	case equality.Semantic.DeepEqual(r.binding.Subjects, want.Subjects):
		p.step("%s: unchanged (binds serviceaccount %s/%s)", bindingKind, o.namespace, sa)
		return nil
	default:
		if err := o.write(what, func() error {
			r.binding.Subjects = want.Subjects
			return result(bindings.Update(ctx, r.binding, metav1.UpdateOptions{}))
		}); err != nil {
			return err
		}
		p.step("%s: now binds serviceaccount %s/%s", bindingKind, o.namespace, sa)
		return nil
	}
	if err := o.write(what, func() error { return result(bindings.Create(ctx, want, metav1.CreateOptions{})) }); err != nil {
		return err
	}
	p.step("%s: %s, binds serviceaccount %s/%s", bindingKind, done, o.namespace, sa)
	return nil
}

// installCorefile writes the edited Corefile, unless it changed since.
func installCorefile(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, st *state) error {
	cur := obj.cm.Data[o.key]
	switch {
	case cur == st.CorefileInstalled:
		p.step("configmap/%s: Corefile unchanged (has multicluster %s)", o.configMap, st.Zone)
	case cur == st.CorefileOriginal:
		if err := setCorefile(ctx, c, o, obj, st.CorefileInstalled); err != nil {
			return err
		}
		p.step("configmap/%s: Corefile edited %s", o.configMap, diffNote(o, st.CorefileOriginal, st.CorefileInstalled))
	default:
		p.warn("configmap/%s: the Corefile changed since install; left as it is", o.configMap)
	}
	return nil
}

// restoring decides, for the Corefile and the image, whether uninstall
// restores the original: each that is what install made is restored, each
// that is the original is kept, and each that is neither (changed since
// install) is refused, or restored with --force.
func restoring(o *options, p printer, obj *objects, st *state, cur string) (corefile, image bool, err error) {
	var conflicts []string
	decide := func(isInstalled, isOriginal bool, what string) bool {
		if !isInstalled && !isOriginal {
			conflicts = append(conflicts, what)
		}
		return !isOriginal
	}
	corefile = decide(cur == st.CorefileInstalled, cur == st.CorefileOriginal,
		fmt.Sprintf("configmap/%s: the Corefile changed since install (it is not what install wrote)", st.ConfigMap))
	image = decide(obj.image() == st.ImageInstalled, obj.image() == st.ImageOriginal,
		fmt.Sprintf("deployment.apps/%s: container %s runs %s, not the installed %s", st.Deployment, st.Container, obj.image(), st.ImageInstalled))
	if len(conflicts) > 0 && !o.force {
		return false, false, refuse("refusing to uninstall: %s; run uninstall --force to restore the originals anyway (what changed since install is lost)", strings.Join(conflicts, "; "))
	}
	for _, c := range conflicts {
		p.warn("%s; restoring the original anyway (--force)", c)
	}
	return corefile, image, nil
}

// uninstall restores the originals: Corefile, then image, then deletes our
// ClusterRoleBinding and ClusterRole, and the state last. It refuses when
// someone changed the Corefile or the image since install, unless force.
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
	oo := *o
	o = &oo
	o.configMap, o.key, o.deployment, o.container = st.ConfigMap, st.Key, st.Deployment, st.Container
	obj, cur, err := get(ctx, c, o, "")
	if err != nil {
		return err
	}
	corefileAct, imageAct, err := restoring(o, p, obj, st, cur)
	if err != nil {
		return err
	}

	// 1. Corefile.
	if corefileAct {
		if err := setCorefile(ctx, c, o, obj, st.CorefileOriginal); err != nil {
			return err
		}
		p.step("configmap/%s: Corefile restored %s", o.configMap, diffNote(o, cur, st.CorefileOriginal))
	} else {
		p.step("configmap/%s: Corefile unchanged (is the original)", o.configMap)
	}

	// 2. Deployment.
	if imageAct {
		if err := setImage(ctx, c, o, p, obj, st.ImageOriginal); err != nil {
			return err
		}
		if err := waitRollout(ctx, c, o, p); err != nil {
			return fmt.Errorf("%w; the ClusterRole %s is not deleted yet: run uninstall again once the pods run", err, stateName)
		}
	} else {
		p.step("deployment.apps/%s: image unchanged (is the original %s)", o.deployment, st.ImageOriginal)
	}

	// 3. Our ClusterRoleBinding and ClusterRole; one not ours is left.
	r, err := getRBAC(ctx, c, p, false)
	if err != nil {
		return err
	}
	for _, d := range []struct {
		kind  string
		there bool
		del   func(context.Context, string, metav1.DeleteOptions) error
	}{{"clusterrolebinding", r.binding != nil, c.RbacV1().ClusterRoleBindings().Delete}, {"clusterrole", r.role != nil, c.RbacV1().ClusterRoles().Delete}} {
		if !d.there {
			continue
		}
		if err := o.write(d.kind+" "+stateName, func() error { return gone(d.del(ctx, stateName, metav1.DeleteOptions{})) }); err != nil {
			return err
		}
		p.step("%s.rbac.authorization.k8s.io/%s: deleted", d.kind, stateName)
	}

	// 4. The state, last: until here a second uninstall can finish the job.
	if err := o.write("configmap "+o.namespace+"/"+stateName, func() error {
		return gone(c.CoreV1().ConfigMaps(o.namespace).Delete(ctx, stateName, metav1.DeleteOptions{}))
	}); err != nil {
		return err
	}
	p.step("configmap/%s: deleted", stateName)
	return nil
}

// setCorefile writes text as the Corefile of CoreDNS's ConfigMap.
func setCorefile(ctx context.Context, c kubernetes.Interface, o *options, obj *objects, text string) error {
	return o.write("configmap "+o.namespace+"/"+o.configMap, func() error {
		obj.cm.Data[o.key] = text
		return result(c.CoreV1().ConfigMaps(o.namespace).Update(ctx, obj.cm, metav1.UpdateOptions{}))
	})
}

// setImage sets the image of CoreDNS's container.
func setImage(ctx context.Context, c kubernetes.Interface, o *options, p printer, obj *objects, image string) error {
	was := obj.image()
	if err := o.write("deployment "+o.namespace+"/"+o.deployment, func() error {
		obj.dep.Spec.Template.Spec.Containers[obj.ci].Image = image
		return result(c.AppsV1().Deployments(o.namespace).Update(ctx, obj.dep, metav1.UpdateOptions{}))
	}); err != nil {
		return err
	}
	p.step("deployment.apps/%s: image %s=%s (was %s)", o.deployment, o.container, image, was)
	return nil
}

// waitRollout waits, as kubectl rollout status does, until every replica
// runs the Deployment's current template.
func waitRollout(ctx context.Context, c kubernetes.Interface, o *options, p printer) error {
	if o.dryRun || o.wait <= 0 {
		return nil
	}
	err := poll(ctx, o, fmt.Sprintf("deployment %s/%s did not roll out", o.namespace, o.deployment), func(ctx context.Context) (string, error) {
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
	if err != nil {
		return err
	}
	p.step("deployment.apps/%s: rolled out", o.deployment)
	return nil
}

// diffNote counts the lines lineDiff shows, and in a dry run shows them.
func diffNote(o *options, a, b string) string {
	d := lineDiff(a, b)
	s := fmt.Sprintf("(+%d -%d lines)", strings.Count("\n"+d, "\n+"), strings.Count("\n"+d, "\n-"))
	if o.dryRun {
		s += ":\n    " + strings.ReplaceAll(strings.TrimSuffix(d, "\n"), "\n", "\n    ")
	}
	return s
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

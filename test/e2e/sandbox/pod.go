package sandbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// PodOptions say which container of a Deployment to run under runc, and
// with what, as the kubelet and a CRI runtime would start it.
type PodOptions struct {
	// Deployment's pod template gives the container, its first (its
	// securityContext, args, ConfigMap volumes and memory limit), and the
	// namespace.
	Deployment *appsv1.Deployment
	// ConfigMaps are the objects the pod's configMap volumes name.
	ConfigMaps []*corev1.ConfigMap
	// Token is the ServiceAccount token the kubelet mounts.
	Token string
	// Rootfs holds the unpacked image (UnpackImage), Image its config.
	Rootfs string
	Image  *v1.Config
	// UnprivilegedPorts sets net.ipv4.ip_unprivileged_port_start=0 in the
	// pod, as containerd 2's CRI does for every pod and containerd 1 and
	// CRI-O do only when configured to.
	UnprivilegedPorts bool
}

// Pod is a container running under runc in a network namespace of its own
// with only a loopback interface, into which the API server's 127.0.0.1
// address is forwarded (ForwardIntoNetns).
type Pod struct {
	*Runc
	Netns     string // its path, /var/run/netns/NAME
	Container corev1.Container
	Context   corev1.SecurityContext // in force: the image's user where the container names none
}

// StartPod runs opts' container as the kubelet would: runc with the
// securityContext (user, no_new_privs, capabilities as containerd's CRI sets
// them for a non-root user, read-only root), the ConfigMap volumes, the
// ServiceAccount directory (token, ca.crt, namespace), the node's resolv.conf
// and hosts (dnsPolicy Default), and KUBERNETES_SERVICE_HOST and _PORT
// naming the API server: credentials as in a cluster, no kubeconfig.
// seccomp is left out: runc has no RuntimeDefault profile. Needs root.
// Everything is removed when the test ends.
func StartPod(t testing.TB, e *harness.Env, opts PodOptions) (*Pod, error) {
	t.Helper()
	spec := opts.Deployment.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("deployment %s has no container", opts.Deployment.Name)
	}
	p := &Pod{Container: spec.Containers[0]}
	sc := p.Container.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	p.Context = *sc.DeepCopy()
	if err := imageUser(&p.Context, opts.Image.User); err != nil {
		return nil, err
	}
	if c := p.Context.Capabilities; c == nil || !slices.Equal(c.Drop, []corev1.Capability{"ALL"}) {
		return nil, fmt.Errorf("securityContext capabilities %v: this harness knows drop: [ALL] only", c)
	}
	mounts, err := podMounts(t, opts, &p.Container, e.Config.CAData)
	if err != nil {
		return nil, err
	}

	id := fmt.Sprintf("e2e-pod-%d-%d", os.Getpid(), podSeq.Add(1))
	p.Netns = "/var/run/netns/" + id
	api, err := url.Parse(e.APIServerURL())
	if err != nil {
		return nil, err
	}
	if err := podNetns(t, id, api.Host); err != nil {
		return nil, err
	}
	bundle, err := p.bundle(t, opts, id, api, mounts)
	if err != nil {
		return nil, err
	}
	if p.Runc, err = StartRunc(t, bundle, id); err != nil {
		return nil, err
	}
	return p, nil
}

// podNetns makes the pod sandbox's network namespace, id, with lo up and
// the API server's apiHost forwarded into it; the test's end removes it.
func podNetns(t testing.TB, id, apiHost string) error {
	if out, err := exec.Command("ip", "netns", "add", id).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", id).Run() })
	if out, err := exec.Command("ip", "-n", id, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	stop, err := ForwardIntoNetns("/var/run/netns/"+id, apiHost)
	if err != nil {
		return err
	}
	t.Cleanup(stop)
	return nil
}

// bundle writes the OCI bundle of p's container (runc spec, changed as
// containerd's CRI would for the pod) and returns its directory.
func (p *Pod) bundle(t testing.TB, opts PodOptions, id string, api *url.URL, mounts []any) (string, error) {
	bundle := t.TempDir()
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return "", fmt.Errorf("runc spec: %v: %s", err, out)
	}
	var oci map[string]any
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err == nil {
		err = json.Unmarshal(b, &oci)
	}
	if err != nil {
		return "", err
	}
	// containerd's CRI for a non-root user: bounding, effective and
	// permitted; no inheritable or ambient (CVE-2022-24769). The exec keeps
	// only what the file capability grants.
	caps := []string{}
	for _, c := range p.Context.Capabilities.Add {
		caps = append(caps, "CAP_"+string(c))
	}
	proc := oci["process"].(map[string]any)
	delete(proc, "rlimits") // the runtime's own, as under containerd
	proc["terminal"] = false
	proc["user"] = map[string]any{"uid": *p.Context.RunAsUser, "gid": *p.Context.RunAsGroup}
	entrypoint := p.Container.Command
	if len(entrypoint) == 0 {
		entrypoint = opts.Image.Entrypoint
	}
	proc["args"] = slices.Concat(entrypoint, p.Container.Args)
	proc["env"] = append(slices.Clone(opts.Image.Env), "KUBERNETES_SERVICE_HOST="+api.Hostname(), "KUBERNETES_SERVICE_PORT="+api.Port())
	proc["cwd"] = cmp.Or(opts.Image.WorkingDir, "/")
	proc["noNewPrivileges"] = p.Context.AllowPrivilegeEscalation != nil && !*p.Context.AllowPrivilegeEscalation
	proc["capabilities"] = map[string]any{"bounding": caps, "effective": caps, "permitted": caps}
	oci["root"] = map[string]any{"path": opts.Rootfs, "readonly": p.Context.ReadOnlyRootFilesystem != nil && *p.Context.ReadOnlyRootFilesystem}
	oci["hostname"] = id
	oci["mounts"] = append(oci["mounts"].([]any), mounts...)
	linux := oci["linux"].(map[string]any)
	for _, ns := range linux["namespaces"].([]any) {
		if ns := ns.(map[string]any); ns["type"] == "network" {
			ns["path"] = p.Netns // the pod sandbox's
		}
	}
	if opts.UnprivilegedPorts {
		linux["sysctl"] = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}
	}
	if m := p.Container.Resources.Limits.Memory(); !m.IsZero() {
		linux["resources"].(map[string]any)["memory"] = map[string]any{"limit": m.Value()}
	}
	b, err = json.MarshalIndent(oci, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644)
	}
	if err != nil {
		return "", err
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- config.json\n%s", b)
		}
	})
	return bundle, nil
}

var podSeq atomic.Int64

// UnroutableNameserver is the pods' nameserver: TEST-NET-1 (RFC 5737),
// which a network namespace with only a loopback interface has no route to.
const UnroutableNameserver = "192.0.2.53"

// imageUser fills runAsUser and runAsGroup from the image's USER (uid or
// uid:gid) where the securityContext names none, as the runtime does.
func imageUser(sc *corev1.SecurityContext, user string) error {
	uid, gid, _ := strings.Cut(user, ":")
	parse := func(s string) (*int64, error) {
		n, err := strconv.ParseInt(cmp.Or(s, "0"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("image user %q: numeric ids only", user)
		}
		return &n, nil
	}
	var err error
	if sc.RunAsUser == nil {
		if sc.RunAsUser, err = parse(uid); err != nil {
			return err
		}
	}
	if sc.RunAsGroup == nil {
		if sc.RunAsGroup, err = parse(cmp.Or(gid, uid)); err != nil {
			return err
		}
	}
	return nil
}

// podMounts are the mounts the kubelet adds: the ServiceAccount directory,
// the node's resolv.conf and hosts (dnsPolicy Default), and the container's
// configMap volumes.
func podMounts(t testing.TB, opts PodOptions, c *corev1.Container, ca []byte) ([]any, error) {
	spec := opts.Deployment.Spec.Template.Spec
	bind := func(src, dst string, ro bool) map[string]any {
		o := []string{"rbind", "rprivate"}
		if ro {
			o = append(o, "ro")
		}
		return map[string]any{"type": "bind", "source": src, "destination": dst, "options": o}
	}
	dir := func(files map[string]string) (string, error) {
		d := t.TempDir()
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o644); err != nil {
				return "", err
			}
		}
		return d, os.Chmod(d, 0o755) // for a non-root user
	}
	sa, err := dir(map[string]string{"token": opts.Token, "ca.crt": string(ca), "namespace": opts.Deployment.Namespace})
	if err != nil {
		return nil, err
	}
	// The node's resolv.conf stands in for dnsPolicy Default's, with a
	// nameserver that no loopback-only namespace can reach, so that a
	// Corefile's forward . /etc/resolv.conf sends nothing anywhere. The
	// host's own may name a 127.x address (systemd-resolved), which in the
	// pod is CoreDNS itself: its loop plugin would stop it.
	etc, err := dir(map[string]string{"resolv.conf": "nameserver " + UnroutableNameserver + "\n"})
	if err != nil {
		return nil, err
	}
	mounts := []any{
		bind(sa, "/var/run/secrets/kubernetes.io/serviceaccount", true),
		bind(filepath.Join(etc, "resolv.conf"), "/etc/resolv.conf", true),
		bind("/etc/hosts", "/etc/hosts", true),
	}
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 || spec.Volumes[i].ConfigMap == nil {
			return nil, fmt.Errorf("volume %s: only configMap volumes are known here", vm.Name)
		}
		ref := spec.Volumes[i].ConfigMap
		j := slices.IndexFunc(opts.ConfigMaps, func(cm *corev1.ConfigMap) bool { return cm.Name == ref.Name })
		if j < 0 {
			return nil, fmt.Errorf("volume %s: no ConfigMap %s given", vm.Name, ref.Name)
		}
		files := map[string]string{}
		for k, v := range opts.ConfigMaps[j].Data {
			files[k] = v
		}
		if len(ref.Items) > 0 {
			files = map[string]string{}
			for _, it := range ref.Items {
				files[it.Path] = opts.ConfigMaps[j].Data[it.Key]
			}
		}
		d, err := dir(files)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, bind(d, vm.MountPath, vm.ReadOnly))
	}
	return mounts, nil
}

// Dig asks the pod's port 53 from inside its network namespace.
func (p *Pod) Dig(name, qtype string, extra ...string) (*harness.DigResult, error) {
	var r *harness.DigResult
	err := harness.InNetns(p.Netns, func() (err error) {
		r, err = harness.Dig(53, name, qtype, extra...)
		return err
	})
	return r, err
}

// Probe GETs an httpGet probe of the container from inside the pod's
// network namespace, as the kubelet's prober reaches into the pod, and
// wants 200.
func (p *Pod) Probe(probe *corev1.Probe) error {
	if probe == nil || probe.HTTPGet == nil {
		return fmt.Errorf("no httpGet probe")
	}
	port := probe.HTTPGet.Port.IntValue()
	if name := probe.HTTPGet.Port.StrVal; name != "" { // a named port, as kubeadm's probes have
		i := slices.IndexFunc(p.Container.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == name })
		if i < 0 {
			return fmt.Errorf("probe port %q: the container has no such port", name)
		}
		port = int(p.Container.Ports[i].ContainerPort)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d%s", port, probe.HTTPGet.Path)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		Dial: func(network, addr string) (conn net.Conn, err error) {
			err = harness.InNetns(p.Netns, func() error { conn, err = net.DialTimeout(network, addr, time.Second); return err })
			return conn, err
		}}}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", u, resp.Status, body)
	}
	return nil
}

// WaitReady waits until the container's readinessProbe passes and its
// port 53 answers over UDP and TCP: CoreDNS's ready plugin can say 200 a
// moment before the server's TCP listener accepts (seen in a CI-style run:
// connection refused on the first query after ready).
func (p *Pod) WaitReady(within time.Duration) error {
	return harness.Poll(within, func() error {
		if ok, err := p.Exited(0); ok {
			return harness.Permanent(fmt.Errorf("the container exited: %v\n%s", err, p.Output()))
		}
		if err := p.Probe(p.Container.ReadinessProbe); err != nil {
			return err
		}
		for _, transport := range []string{"+notcp", "+tcp"} {
			if _, err := p.Dig(".", "NS", transport); err != nil { // any answer, REFUSED too
				return err
			}
		}
		return nil
	})
}

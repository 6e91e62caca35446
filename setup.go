package multicluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/transfer"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustersetdns/multicluster/cache"
)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	routeKlog()
	m, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	m.boundAddrs = boundAddrs(dnsserver.GetConfig(c).ListenHosts, net.InterfaceAddrs)
	ours, _ := c.Get(instanceKey{}).(*[]*Multicluster)
	if ours == nil {
		ours = new([]*Multicluster)
		c.Set(instanceKey{}, ours)
		// A reload from this instance that fails drops the new instance
		// without shutting it down (caddy's Restart), though its
		// OnStartup may have started controllers; and one that fails in
		// this instance's OnShutdown, after the new one took over, leaves
		// this instance's later shutdowns unrun.
		c.OnRestartFailed(func() error { stopUnserved(); return nil })
	}
	*ours = append(*ours, m)
	c.OnStartup(m.start)
	c.OnStartup(func() error {
		// The transfer plugin of the server block, if any, tells
		// secondaries when the zone changes.
		if t, ok := dnsserver.GetConfig(c).Handler("transfer").(*transfer.Transfer); ok && t != nil && m.ctx != nil {
			if len(m.nsAddrs) == 0 {
				log.Infof("zone transfers give ns.dns.<zone> the server's own addresses %v; behind a Service, set ns_address to the Service's", m.boundAddrs)
			}
			go m.notifyOnChange(m.ctx, t)
		}
		return nil
	})
	c.OnShutdown(m.shutdown)
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		m.Next = next
		return m
	})
	return nil
}

// instanceKey keys, in a Caddy instance's storage, the plugin's instances
// that Caddy instance set up.
type instanceKey struct{}

// running are the plugin's instances whose controller runs, of every Caddy
// instance: while a reload starts the new ones, the old ones still serve.
var running = struct {
	sync.Mutex
	m map[*Multicluster]bool
}{m: map[*Multicluster]bool{}}

// stopUnserved stops every running instance that no serving Caddy instance
// set up: those of a reload that failed, or of the instance it replaced.
func stopUnserved() {
	var keep []*Multicluster
	for _, inst := range caddy.Instances() {
		inst.StorageMu.RLock()
		if ours, ok := inst.Storage[instanceKey{}].(*[]*Multicluster); ok {
			keep = append(keep, *ours...)
		}
		inst.StorageMu.RUnlock()
	}
	running.Lock()
	var stop []*Multicluster
	for m := range running.m {
		if !slices.Contains(keep, m) {
			stop = append(stop, m)
		}
	}
	running.Unlock()
	for _, m := range stop {
		m.shutdown()
	}
	if len(stop) > 0 {
		log.Infof("reload failed: stopped %d watch(es) that no serving instance holds", len(stop))
		// The metrics are the process's: say again what the instances
		// still serving know.
		ready := true
		for _, m := range keep {
			ready = ready && m.Ready()
		}
		v := 0.0
		if ready {
			v = 1
		}
		synced.Set(v)
	}
}

// maxZoneLen is the longest forward zone, with its final dot: the longest
// name before it, _<port>._sctp.<svc>.<ns>.svc. with a port name of 62
// characters (the longest the plugin takes) and labels of 63, and the zone
// then fit in 254 characters, 255 octets. Endpoint names, which hold a cluster
// ID of up to 63 characters beside those labels, are checked one by one
// (cache.fitNames).
const maxZoneLen = 254 - len("_._sctp...svc.") - 62 - 2*63

// parse reads one multicluster block. Every error names the Corefile line.
func parse(c *caddy.Controller) (*Multicluster, error) {
	m := &Multicluster{TTL: defaultTTL, startupTimeout: defaultStartupTimeout}
	seen := false
	for c.Next() {
		if seen {
			return nil, plugin.ErrOnce
		}
		seen = true
		m.setZones(plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys))
		for _, z := range m.forward {
			if z == "." {
				// Every name would be the plugin's, and the apex's SOA
				// ("ns.dns..") does not pack: every reply would be lost.
				return nil, c.Err(`zone "." would make every name the plugin's: name the MCS zone, as in "multicluster clusterset.local"`)
			}
			if len(z) > maxZoneLen {
				return nil, c.Errf("zone %s is %d characters long: at most %d, so that every name answered in it fits in 255 octets", z, len(z), maxZoneLen)
			}
		}
		for c.NextBlock() {
			if err := m.option(c); err != nil {
				return nil, err
			}
		}
		if m.endpoint != "" && m.kubeconfig != "" {
			return nil, c.Err("endpoint and kubeconfig cannot be used together")
		}
		if len(m.tlsFiles) > 0 && m.endpoint == "" {
			return nil, c.Err("tls needs endpoint")
		}
		if m.endpointPTR && len(m.Zones) == len(m.forward) {
			return nil, c.Err("endpoint_ptr needs a reverse zone among ZONES, such as 10.0.0.0/8 or in-addr.arpa")
		}
		for _, ns := range m.namespaces {
			if cache.Protected(ns, m.allowNS) {
				log.Warningf("namespaces names %s, a protected namespace whose imports are not answered; add allow_namespaces %s to answer them", ns, ns)
			}
		}
	}
	return m, nil
}

// option reads one option of the block, the one c is at.
func (m *Multicluster) option(c *caddy.Controller) error {
	opt := c.Val()
	args := c.RemainingArgs()
	// count checks the number of arguments: at least lo, at most hi (-1 for any).
	count := func(lo, hi int) error {
		if len(args) < lo || hi >= 0 && len(args) > hi {
			return c.ArgErr()
		}
		return nil
	}
	switch opt {
	case "kubeconfig":
		if err := count(1, 2); err != nil {
			return err
		}
		m.kubeconfig = args[0]
		if len(args) == 2 {
			m.kubecontext = args[1]
		}
	case "endpoint":
		if err := count(1, 1); err != nil {
			return err
		}
		if u, err := url.Parse(args[0]); err != nil || u.Scheme == "" || u.Host == "" {
			return c.Errf("endpoint must be a URL such as https://10.0.0.1:6443, not %q", args[0])
		}
		m.endpoint = args[0]
	case "tls":
		if err := count(3, 3); err != nil {
			return err
		}
		m.tlsFiles = args
	case "apiserver_qps", "apiserver_burst":
		if err := count(1, 1); err != nil {
			return err
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n <= 0 {
			return c.Errf("%s must be a positive whole number, not %q", opt, args[0])
		}
		if opt == "apiserver_qps" {
			m.qps = float32(n)
		} else {
			m.burst = n
		}
	case "labels":
		if err := count(1, -1); err != nil {
			return err
		}
		expr := strings.Join(args, " ")
		if _, err := labels.Parse(expr); err != nil {
			return c.Errf("labels: %q is not a label selector: %v", expr, err)
		}
		m.labels = expr
	case "ttl":
		if err := count(1, 1); err != nil {
			return err
		}
		ttl, err := strconv.Atoi(args[0])
		if err != nil || ttl < 0 || ttl > 3600 {
			return c.Errf("ttl must be a whole number of seconds from 0 to 3600, not %q", args[0])
		}
		m.TTL = uint32(ttl)
	case "fallthrough":
		m.Fall.SetZonesFromArgs(args)
	case "fallback":
		if err := count(1, 1); err != nil {
			return err
		}
		if args[0] != cache.V1alpha1 {
			return c.Errf("fallback takes %q, the only version there is to fall back to (v1beta1 and v1alpha2 are always read), not %q", cache.V1alpha1, args[0])
		}
		m.fallback = true
	case "namespaces":
		if err := count(1, -1); err != nil {
			return err
		}
		for _, ns := range args {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				return c.Errf("namespace %q is not a valid namespace name", ns)
			}
		}
		m.namespaces = append(m.namespaces, args...)
	case "allow_namespaces":
		if err := count(1, -1); err != nil {
			return err
		}
		for _, ns := range args {
			name, pattern := strings.CutSuffix(ns, "*")
			if pattern {
				name = strings.TrimSuffix(name, "-")
			}
			if len(validation.IsDNS1123Label(name)) > 0 {
				return c.Errf("allow_namespaces: %q is neither a namespace name nor a pattern such as openshift-*", ns)
			}
		}
		m.allowNS = append(m.allowNS, args...)
	case "deny_ranges":
		if err := count(1, -1); err != nil {
			return err
		}
		for _, a := range args {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				ip, ierr := netip.ParseAddr(a)
				if ierr != nil || ip.Zone() != "" {
					return c.Errf("deny_ranges: %q is neither a CIDR such as 10.244.0.0/16 nor an IP address", a)
				}
				p = netip.PrefixFrom(ip, ip.BitLen())
			}
			m.denyRanges = append(m.denyRanges, p.Masked())
		}
	case "max_endpoints":
		if err := count(1, 1); err != nil {
			return err
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n <= 0 {
			return c.Errf("max_endpoints must be a positive whole number, not %q", args[0])
		}
		m.maxEndpoints = n
	case "cluster_id":
		if err := count(1, 1); err != nil {
			return err
		}
		if errs := validation.IsDNS1123Subdomain(args[0]); len(errs) > 0 {
			return c.Errf("cluster_id %q is not a cluster ID, an RFC 1123 subdomain such as east or east.example.com", args[0])
		}
		m.clusterID = args[0]
	case "ns_address":
		if err := count(1, -1); err != nil {
			return err
		}
		for _, a := range args {
			ip := net.ParseIP(a)
			if ip == nil || ip.IsUnspecified() {
				return c.Errf("ns_address %q is not an IP address", a)
			}
			m.nsAddrs = appendAddr(m.nsAddrs, ip)
		}
	case "prefer_local":
		if err := count(0, 0); err != nil {
			return err
		}
		m.preferLocal = true
	case "local_zone":
		if err := count(1, 1); err != nil {
			return err
		}
		z := cache.TopologyZone(args[0])
		if z == localZoneFromNode {
			if os.Getenv("NODE_NAME") == "" {
				return c.Err("local_zone node reads the zone of the node named by NODE_NAME, which is not set: " +
					"set it from the pod's spec.nodeName (the downward API)")
			}
		} else if z == "" {
			return c.Errf("local_zone must be a zone name such as eu-west-1a (a DNS label), or node, not %q", args[0])
		}
		m.localZone = z
	case "cluster_selectors":
		if err := count(0, 0); err != nil {
			return err
		}
		m.clusterSel = true
	case "zonal":
		if err := count(0, 0); err != nil {
			return err
		}
		m.zonal = true
	case "endpoint_ptr":
		if err := count(0, 0); err != nil {
			return err
		}
		m.endpointPTR = true
	case "startup_timeout":
		if err := count(1, 1); err != nil {
			return err
		}
		d, err := time.ParseDuration(args[0])
		if err != nil || d < 0 {
			return c.Errf("startup_timeout must be a duration such as 5s, not %q", args[0])
		}
		m.startupTimeout = d
	default:
		return c.Errf("unknown option %q", opt)
	}
	return nil
}

// restConfig is the configured endpoint or kubeconfig, or the in-cluster configuration.
func (m *Multicluster) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case m.endpoint != "":
		cfg = &rest.Config{Host: m.endpoint}
		if len(m.tlsFiles) == 3 {
			cfg.TLSClientConfig = rest.TLSClientConfig{CertFile: m.tlsFiles[0], KeyFile: m.tlsFiles[1], CAFile: m.tlsFiles[2]}
		}
	case m.kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: m.kubeconfig}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: m.kubecontext}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	default:
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.Dial = cache.DialAPIServer
	if m.qps > 0 {
		cfg.QPS = m.qps
		// client-go refuses a QPS without a burst: its default burst, or
		// one second's worth of the QPS when that is more.
		cfg.Burst = max(rest.DefaultBurst, int(m.qps))
	}
	if m.burst > 0 {
		cfg.Burst = m.burst
	}
	return cfg, nil
}

// start begins watching and waits, at most startup_timeout, for the first
// sync. Until then queries for our zones get SERVFAIL; the server starts anyway.
func (m *Multicluster) start() error {
	cfg, err := m.restConfig()
	if err != nil {
		return plugin.Error(pluginName, fmt.Errorf("kubernetes client configuration: %w", err))
	}
	cfg.UserAgent = "coredns-multicluster"
	// One HTTP client, so one connection, for every client: with Dial set,
	// client-go would give each its own transport.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	imports, err := cache.NewImportClient(cfg, hc)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	protoCfg := rest.CopyConfig(cfg)
	protoCfg.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfigAndClient(protoCfg, hc)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	m.closeIdle = hc.CloseIdleConnections
	if m.localZone == localZoneFromNode {
		m.localZone = nodeZone(kube, os.Getenv("NODE_NAME"))
	}
	var sel cache.Selectors
	if m.clusterSel {
		sel |= cache.SelectByCluster
	}
	if m.zonal {
		sel |= cache.SelectByZone
	}
	ctrl := cache.New(dyn, imports, kube, cache.Config{
		Zones: m.forward, TTL: m.TTL, Fallback: m.fallback, Namespaces: m.namespaces, Labels: m.labels,
		ClusterID: m.clusterID, PreferLocal: m.preferLocal, LocalZone: m.localZone,
		DenyRanges: m.denyRanges, AllowNamespaces: m.allowNS, MaxEndpoints: m.maxEndpoints,
		Reverse: len(m.Zones) > len(m.forward), ReverseEndpoints: m.endpointPTR, Selectors: sel, Log: log, OnSkip: recordSkip, OnStats: recordStats, OnUnread: recordUnread,
	})
	m.backend = ctrl
	synced.Set(0)
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx, m.stop, m.done = ctx, cancel, make(chan struct{})
	go func() { defer close(m.done); ctrl.Run(ctx) }()
	running.Lock()
	running.m[m] = true
	running.Unlock()

	deadline := time.After(m.startupTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ctrl.HasSynced() {
		select {
		case <-deadline:
			log.Warningf("not synced with the API server after %s; answering SERVFAIL for %v until synced", m.startupTimeout, m.Zones)
			return nil
		case <-tick.C:
		}
	}
	return nil
}

func (m *Multicluster) shutdown() error {
	running.Lock()
	delete(running.m, m)
	running.Unlock()
	if m.stop != nil {
		m.stop()
		<-m.done
	}
	if m.closeIdle != nil {
		m.closeIdle() // a reload's old instance leaves no connection behind
	}
	return nil
}

// localZoneFromNode is the local_zone value that reads the zone from the
// replica's Node.
const localZoneFromNode = "node"

// nodeZone reads, once, the topology.kubernetes.io/zone label of the node
// the replica runs on (get on nodes: the one rule this option needs). On a
// failure, or without the label, the replica answers as without a zone: the
// local cluster's endpoints first, as before, and says so.
func nodeZone(kube kubernetes.Interface, node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		log.Warningf("local_zone node: reading node %s: %v; answering without the replica's zone", node, err)
		return ""
	}
	z := cache.TopologyZone(n.Labels[corev1.LabelTopologyZone])
	if z == "" {
		log.Warningf("local_zone node: node %s has no usable %s label (%q); answering without the replica's zone", node, corev1.LabelTopologyZone, n.Labels[corev1.LabelTopologyZone])
		return ""
	}
	log.Infof("local_zone node: node %s is in zone %s", node, z)
	return z
}

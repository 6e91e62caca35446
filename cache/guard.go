package cache

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// What no peer can make the plugin answer. ServiceImports and multi-cluster
// EndpointSlices are written by an MCS controller from other clusters' data,
// so every address, namespace and source cluster in them is untrusted. Each
// guard runs when an object changes (readShared, sliceFrom, the slice
// transform, sync), never when a query comes; what it drops is reported as
// any other unusable part of an object (report.go).
//
//   - addresses no Service can have, and the operator's denied ranges
//     (addressProblem), are left out of imports and slices;
//   - imports in protected namespaces are not answered unless allowed
//     (Config.protected);
//   - a headless import that lists its clusters takes EndpointSlices of those
//     clusters only (Import.lists, in sync);
//   - a slice that claims the local cluster counts as local only for the
//     addresses of the local Service's own EndpointSlices (localslices.go);
//   - a service keeps at most Config.MaxEndpoints endpoints (endpointBudget).

// DefaultMaxEndpoints is the default cap on a service's ready endpoints: far
// above any real headless service (a DNS message over TCP holds about 4,000
// A records), low enough that one import cannot take a replica's memory.
const DefaultMaxEndpoints = 10000

// ProtectedNamespaces are the namespaces whose imports are not answered
// unless Config.AllowNamespaces names them: the control plane's own and
// OpenShift's, where a name that resolves to a peer's address could stand
// in for a system service. A pattern ending in '*' matches every namespace
// that starts with what comes before it.
var ProtectedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "kube-*", "openshift-*"}

// matchNamespace reports whether a namespace or pattern ("kube-*") matches ns.
func matchNamespace(pattern, ns string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(ns, prefix)
	}
	return pattern == ns
}

func matchesAny(patterns []string, ns string) bool {
	for _, p := range patterns {
		if matchNamespace(p, ns) {
			return true
		}
	}
	return false
}

// Protected reports whether imports of the namespace are refused: it is
// one of ProtectedNamespaces, and allow (names and patterns) lets it not in.
func Protected(namespace string, allow []string) bool {
	return matchesAny(ProtectedNamespaces, namespace) && !matchesAny(allow, namespace)
}

func (cfg *Config) protected(namespace string) bool { return Protected(namespace, cfg.AllowNamespaces) }

// broadcast is IPv4's limited broadcast address.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// addressProblem returns why ip may not be answered, or "" when it may. No
// Service has an unspecified (0.0.0.0/8, ::), loopback, link-local,
// multicast or broadcast address, in IPv4, IPv6 or IPv4-mapped IPv6 form,
// and an address is never one of deny, the operator's denied ranges.
func addressProblem(ip netip.Addr, deny []netip.Prefix) string {
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0:
		return ReasonUnspecifiedAddress
	case ip.IsLoopback():
		return ReasonLoopbackAddress
	case ip.IsLinkLocalUnicast():
		return ReasonLinkLocalAddress
	case ip.IsMulticast():
		return ReasonMulticastAddress
	case ip == broadcast:
		return ReasonBroadcastAddress
	}
	for _, p := range deny {
		if p.Contains(ip) {
			return ReasonDeniedAddress
		}
	}
	return ""
}

// endpointBudget keeps every service within a cap of ready endpoints, in
// the EndpointSlice informer's transform, so that what is cut is never
// stored: a service's slices share max endpoints, first come first kept,
// and a slice that finds no room left keeps what fits. The transform sees
// every add, update and delete; only the informer's delete handler tells
// deletes apart, and gives the room back (release). Its maps are keyed by
// the strings the slim slices hold, so that they cost no copies: about 60
// bytes a slice and as much a service.
type endpointBudget struct {
	max int
	mu  sync.Mutex
	// kept is what each slice kept, and for which service; used, by
	// service, the sum of what its slices kept.
	kept map[objectID]budgetEntry
	used map[objectID]int
}

// objectID names an object, or a service, in a namespace.
type objectID struct{ namespace, name string }

type budgetEntry struct {
	service string
	n       int
}

func newEndpointBudget(max int) *endpointBudget {
	return &endpointBudget{max: max, kept: map[objectID]budgetEntry{}, used: map[objectID]int{}}
}

// fit cuts s's endpoints to the room its service has left, and records what
// it kept.
func (b *endpointBudget) fit(s *Slice) {
	if s.Service == "" || b.max <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id, svc := objectID{s.Namespace, s.Name}, objectID{s.Namespace, s.Service}
	b.releaseLocked(id)
	// Addresses are what is counted: an endpoint may hold up to 100 of
	// them, and each is a record.
	n := 0
	for _, e := range s.Endpoints {
		n += len(e.Addrs)
	}
	if room := max(b.max-b.used[svc], 0); n > room {
		// Copies: the cut ones must not stay reachable.
		kept := make([]Endpoint, 0, min(len(s.Endpoints), room))
		for _, e := range s.Endpoints {
			if room == 0 {
				break
			}
			// Endpoints named by their address share one array: each
			// kept one gets its own.
			e.Addrs = slices.Clone(e.Addrs[:min(len(e.Addrs), room)])
			kept = append(kept, e)
			room -= len(e.Addrs)
		}
		s.Endpoints, n = kept, b.max-b.used[svc]
		s.addProblem(ReasonTooManyEndpoints)
	}
	b.kept[id] = budgetEntry{s.Service, n}
	b.used[svc] += n
}

// release gives back the room of the deleted slice namespace/name.
func (b *endpointBudget) release(namespace, name string) {
	b.mu.Lock()
	b.releaseLocked(objectID{namespace, name})
	b.mu.Unlock()
}

func (b *endpointBudget) releaseLocked(id objectID) {
	e, ok := b.kept[id]
	if !ok {
		return
	}
	delete(b.kept, id)
	svc := objectID{id.namespace, e.service}
	if b.used[svc] -= e.n; b.used[svc] <= 0 {
		delete(b.used, svc)
	}
}

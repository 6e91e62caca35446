package cache

import (
	"net/netip"
	"slices"
	"sync"
)

const shardCount = 64

// index maps service keys to their immutable answers. Writers replace one
// service's pointer; readers never see a half-built service. Sharding keeps a
// write to one service from blocking readers of the others, and the cost of a
// change does not grow with the number of services.
type index struct {
	shards [shardCount]shard

	nsMu       sync.RWMutex
	namespaces map[string]int            // services per namespace, for empty non-terminals
	byIP       map[netip.Addr][]*Service // ClusterSetIP or headless endpoint address -> services, for reverse lookups; nil without them
	endpoints  bool                      // byIP holds headless services' endpoint addresses too
}

type shard struct {
	mu sync.RWMutex
	m  map[string]*Service
}

// newIndex makes an empty index; with reverse it also maps ClusterSetIPs
// (and, with endpoints, the addresses of headless services' ready endpoints)
// to their services, for PTR answers, which costs about 60 bytes an address.
func newIndex(reverse, endpoints bool) *index {
	x := &index{namespaces: map[string]int{}, endpoints: endpoints}
	if reverse {
		x.byIP = map[netip.Addr][]*Service{}
	}
	for i := range x.shards {
		x.shards[i].m = map[string]*Service{}
	}
	return x
}

func (x *index) shard(k string) *shard {
	h := uint32(2166136261) // FNV-1a, inline to avoid allocating
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return &x.shards[h%shardCount]
}

func (x *index) get(k string) *Service {
	s := x.shard(k)
	s.mu.RLock()
	svc := s.m[k]
	s.mu.RUnlock()
	return svc
}

// put stores svc under k, or deletes k when svc is nil, and returns what was there.
func (x *index) put(k string, svc *Service) *Service {
	s := x.shard(k)
	s.mu.Lock()
	old := s.m[k]
	if svc == nil {
		delete(s.m, k)
	} else {
		s.m[k] = svc
	}
	s.mu.Unlock()
	x.nsMu.Lock()
	if old != nil && x.byIP != nil {
		for _, ip := range x.reverseAddrs(old) {
			x.byIP[ip] = slices.DeleteFunc(slices.Clone(x.byIP[ip]), func(o *Service) bool { return o == old })
			if len(x.byIP[ip]) == 0 {
				delete(x.byIP, ip)
			}
		}
	}
	if svc != nil && x.byIP != nil {
		for _, ip := range x.reverseAddrs(svc) {
			x.byIP[ip] = append(slices.Clone(x.byIP[ip]), svc)
		}
	}
	x.nsMu.Unlock()
	if (old == nil) != (svc == nil) {
		ns := ""
		if svc != nil {
			ns = svc.Namespace()
		} else {
			ns = old.Namespace()
		}
		x.nsMu.Lock()
		if svc != nil {
			x.namespaces[ns]++
		} else if x.namespaces[ns]--; x.namespaces[ns] <= 0 {
			delete(x.namespaces, ns)
		}
		x.nsMu.Unlock()
	}
	return old
}

// reverseAddrs are the addresses svc is indexed at.
func (x *index) reverseAddrs(svc *Service) []netip.Addr {
	if x.endpoints {
		return svc.ReverseAddrs()
	}
	return svc.IPs()
}

// lookupIP returns the services named at ip in reverse zones (ReverseAddrs).
func (x *index) lookupIP(ip netip.Addr) []*Service {
	x.nsMu.RLock()
	defer x.nsMu.RUnlock()
	return x.byIP[ip]
}

func (x *index) hasNamespace(ns string) bool {
	x.nsMu.RLock()
	_, ok := x.namespaces[ns]
	x.nsMu.RUnlock()
	return ok
}

// each calls f for every service until f returns false. It sees each shard as
// it is when reached.
func (x *index) each(f func(*Service) bool) {
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		list := make([]*Service, 0, len(s.m))
		for _, svc := range s.m {
			list = append(list, svc)
		}
		s.mu.RUnlock()
		for _, svc := range list {
			if !f(svc) {
				return
			}
		}
	}
}

func (x *index) count() int {
	n := 0
	for i := range x.shards {
		x.shards[i].mu.RLock()
		n += len(x.shards[i].m)
		x.shards[i].mu.RUnlock()
	}
	return n
}

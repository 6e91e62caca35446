package cache

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Answers are the precomputed records of one name. The records are shared by
// every reader: never modify them, copy them into a reply.
type Answers struct {
	A     []dns.RR
	AAAA  []dns.RR
	SRV   []dns.RR
	Extra []dns.RR // A/AAAA glue of the SRV targets
}

// Target is the name of an endpoint's answers, an SRV record's target: the
// owner of its address records.
func (a *Answers) Target() string {
	switch {
	case len(a.A) > 0:
		return a.A[0].Header().Name
	case len(a.AAAA) > 0:
		return a.AAAA[0].Header().Name
	}
	return ""
}

// Closest says which answers of a headless service, at its name and its
// port names, hold the local cluster's ready endpoints alone (the service
// prefers close endpoints, and the local cluster has some ready); the others
// hold every cluster's. Each address family is decided on its own, so that
// an A query never goes empty while another cluster has IPv4 endpoints.
type Closest uint8

const (
	ClosestA    Closest = 1 << iota // A: the local cluster has a ready IPv4 endpoint
	ClosestAAAA                     // AAAA: the local cluster has a ready IPv6 endpoint
	ClosestSRV                      // SRV: the local cluster has a ready endpoint
	// The same in the answering replica's own zone (Config.LocalZone): then
	// those alone answer. Each is its Closest flag shifted by nearShift.
	nearA
	nearAAAA
	nearSRV
)

// nearShift turns a Closest flag into its flag for the replica's zone.
const nearShift = 3

// Of reports whether the answers of type qtype hold the local cluster's
// endpoints alone.
func (c Closest) Of(qtype uint16) bool {
	switch qtype {
	case dns.TypeA:
		return c&ClosestA != 0
	case dns.TypeAAAA:
		return c&ClosestAAAA != 0
	case dns.TypeSRV:
		return c&ClosestSRV != 0
	}
	return false
}

// ZoneAnswers are a headless service's answers inside one zone.
type ZoneAnswers struct {
	Service Answers             // <svc>.<ns>.svc.<zone>
	Sub     map[string]*Answers // "_<port>._<proto>" and "<host>.<cluster>", relative to the service name
	ENT     map[string]struct{} // empty non-terminals below the service name
	Closest Closest             // which answers at the service's name and port names are the local cluster's alone
	// ByCluster and ByZone group the ready endpoints by their cluster and
	// by their topology zone, for the names that pin or prefer one; each
	// is nil unless Config.Selectors asks for it.
	ByCluster map[string]*Selection
	ByZone    map[string]*Selection
}

// Selection is a set of a headless service's ready endpoints in one zone:
// those of one cluster, or of one topology zone. It holds no record of its
// own, only the endpoints' (Sub): a pointer per endpoint.
type Selection struct {
	Endpoints []*Answers // the endpoints' own answers, in name order
	// Shared, when endpoints of the set share an address (pods on their
	// node's network), holds in A and AAAA each address of the set once;
	// nil otherwise, when the endpoints' own records are those addresses.
	Shared *Answers
}

// Selectors says which groupings of endpoints (ZoneAnswers.ByCluster,
// ByZone) the answers keep.
type Selectors uint8

const (
	SelectByCluster Selectors = 1 << iota // cluster_selectors
	SelectByZone                          // zonal
)

// Service is the immutable answer set of one imported service.
//
// A ClusterSetIP service keeps only its addresses and ports, those of the
// import of the view it answers from: its records differ from zone to zone
// only in their names, and a reader writes them straight into its reply, so
// that a hundred thousand services do not each hold a dozen records and two
// maps. A headless service, whose answers are gathered from many
// EndpointSlices, keeps its records ready (Zone).
//
// Readers see the import it answers from through methods, only what answers
// need: its problems, whether the view had data and the rest are the cache's.
type Service struct {
	rec  *Import  // the import of the view the answers come from; never modified
	more *details // nil for a ClusterSetIP service whose ports differ in number, most of them
}

func (s *Service) Namespace() string       { return s.rec.Namespace }
func (s *Service) Name() string            { return s.rec.Name }
func (s *Service) Version() string         { return s.rec.Version() }
func (s *Service) ResourceVersion() string { return s.rec.ResourceVersion }
func (s *Service) Headless() bool          { return s.rec.Headless }

// IPs are a ClusterSetIP service's addresses: at most one per family, in the
// object's order; none when headless. Never modify them.
func (s *Service) IPs() []netip.Addr { return s.rec.IPs }

// ReverseAddrs are the addresses a reverse zone names the service at: a
// ClusterSetIP service's IPs, or each address of a headless service's ready
// endpoints once, sorted.
func (s *Service) ReverseAddrs() []netip.Addr {
	if !s.rec.Headless {
		return s.rec.IPs
	}
	if s.more == nil {
		return nil
	}
	var out []netip.Addr
	for _, e := range s.more.endpoints {
		out = append(out, e.addrs...)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// EndpointNames appends to out the names ("<host>.<cluster>") of a headless
// service's ready endpoints that have the address ip, in name order.
func (s *Service) EndpointNames(ip netip.Addr, out []string) []string {
	if s.more == nil {
		return out
	}
	for _, e := range s.more.endpoints {
		if slices.Contains(e.addrs, ip) {
			out = append(out, e.name)
		}
	}
	return out
}

// Ports are the service's named ports, in the object's order. Never modify them.
func (s *Service) Ports() []Port { return s.rec.Ports }

// details are what only some services need: kept apart, they cost the others
// nothing (a Service is two pointers).
type details struct {
	srvPorts  []Port        // the ports at the service's own name, when some ports share a number
	endpoints []namedAddrs  // headless only: what zones were made from
	zones     []ZoneAnswers // headless only: one per configured zone, in the configured order
}

// Zone returns a headless service's answers in the zone at index fi of the
// configured zones; nil for a ClusterSetIP service or past the last zone.
func (s *Service) Zone(fi int) *ZoneAnswers {
	if s.more == nil || fi < 0 || fi >= len(s.more.zones) {
		return nil
	}
	return &s.more.zones[fi]
}

// Endpoints is the number of a headless service's ready endpoint names.
func (s *Service) Endpoints() int {
	if s.more == nil {
		return 0
	}
	return len(s.more.endpoints)
}

// SRVPorts are the ports of the SRV records at the service's own name: the
// first port of each number, in the order of Ports. A record there is one
// target and port, and an RRset holds no duplicates (RFC 2181 §5), so ports
// tcp 42/TCP and udp 42/UDP, which keep a record each at their port names,
// give one record there. Never modify it.
func (s *Service) SRVPorts() []Port {
	if s.more != nil && s.more.srvPorts != nil {
		return s.more.srvPorts
	}
	return s.rec.Ports
}

// inputs is what the service's answers were made from.
func (s *Service) inputs() normalized {
	n := normalized{headless: s.rec.Headless, ips: s.rec.IPs, ports: s.rec.Ports}
	if s.more != nil {
		n.endpoints = s.more.endpoints
	}
	return n
}

// normalized is what the answers of a service are made from; two services with
// equal normalized inputs have equal answers.
type normalized struct {
	headless  bool
	ips       []netip.Addr
	ports     []Port
	endpoints []namedAddrs // sorted by name
}

type namedAddrs struct {
	name  string // "<host>.<cluster>"
	zone  string // its topology zone; "" when none is known
	addrs []netip.Addr
	local bool // of the local cluster, and the service prefers it
	near  bool // local, and in the answering replica's zone
}

// normalize gathers the inputs of one service. It returns false when the
// service has nothing to answer: a ClusterSetIP import without IPs, or a
// headless import without ready endpoints. A headless import that lists
// its clusters takes the slices of those clusters only. local is the
// cluster whose endpoints a headless service answers alone while it has some
// ready (closest), or "" for no preference; with a preference, the local
// cluster's endpoints in zone, the answering replica's zone when known,
// come before them; proven, when not nil, says which
// endpoints of a slice that claims the local cluster really are its
// (localslices.go): the others are answered as any other cluster's.
func normalize(im *Import, viewSlices []*Slice, local, zone string, proven func(*Slice, Endpoint) bool) (normalized, bool) {
	n := normalized{headless: im.Headless, ports: im.Ports}
	if !im.Headless {
		n.ips = im.IPs
		return n, len(n.ips) > 0
	}
	byName := map[string][]netip.Addr{}
	var zones map[string]string    // endpoint name to its zone, for those with one
	var localNames map[string]bool // made only for a service with a preference
	// An endpoint that claims the local cluster without proof is answered
	// as another cluster's; one that takes the name of a proven endpoint
	// would be answered as that endpoint, the local cluster's: it is left
	// out. So the proven names come first.
	var unproven map[*Endpoint]bool
	if local != "" {
		for _, s := range viewSlices {
			if s.Cluster != local || !im.lists(s.Cluster) {
				continue
			}
			for i := range s.Endpoints {
				e := &s.Endpoints[i]
				switch {
				case proven == nil || proven(s, *e):
					if localNames == nil {
						localNames = map[string]bool{}
					}
					localNames[e.Host+"."+s.Cluster] = true
				case unproven == nil:
					unproven = map[*Endpoint]bool{e: true}
				default:
					unproven[e] = true
				}
			}
		}
	}
	for _, s := range viewSlices {
		if s.Cluster == "" || !im.lists(s.Cluster) {
			continue
		}
		for i, e := range s.Endpoints {
			name := e.Host + "." + s.Cluster
			if unproven[&s.Endpoints[i]] && localNames[name] {
				continue
			}
			for _, a := range e.Addrs {
				if !slices.Contains(byName[name], a) {
					byName[name] = append(byName[name], a)
				}
			}
			if e.Zone != "" {
				if zones == nil {
					zones = map[string]string{}
				}
				if z, ok := zones[name]; !ok || e.Zone < z { // the same whatever the slices' order
					zones[name] = e.Zone
				}
			}
		}
	}
	for name, addrs := range byName {
		slices.SortFunc(addrs, netip.Addr.Compare)
		isLocal := localNames[name]
		n.endpoints = append(n.endpoints, namedAddrs{name, zones[name], addrs, isLocal, isLocal && zone != "" && zones[name] == zone})
	}
	slices.SortFunc(n.endpoints, func(a, b namedAddrs) int { return strings.Compare(a.name, b.name) })
	return n, len(n.endpoints) > 0
}

// fitNames leaves out of ss, a headless import's slices, the endpoints whose
// names (<host>.<cluster>.<svc>.<ns>.svc.<zone>) would pass DNS's limit of
// 255 octets in the longest of zones: a cluster ID, a label's value, may
// be 63 characters with dots, beside a hostname, a service and a namespace
// of 63 each. A resolver refuses a reply that holds such a name whole. It
// returns the slices to answer from (ss itself when none lost any), with
// copies of those that lost endpoints, and the slices that lost some.
func fitNames(im *Import, ss []*Slice, zones []string) (fit, cut []*Slice) {
	longest := 0
	for _, z := range zones {
		longest = max(longest, len(z))
	}
	// A name of 255 octets is 254 characters with its final dot.
	room := 254 - len(".") - (len(im.Name) + len(im.Namespace) + len("..svc.")) - longest
	// Loops, not a closure: a closure escaped, an allocation per rebuild.
	for i, s := range ss {
		hostRoom := room - len(".") - len(s.Cluster)
		host := 0
		for _, e := range s.Endpoints {
			host = max(host, len(e.Host))
		}
		switch {
		case host <= hostRoom:
			if cut != nil {
				fit = append(fit, s)
			}
			continue
		case cut == nil:
			fit = slices.Clone(ss[:i])
		}
		short := *s
		short.Endpoints = nil
		for _, e := range s.Endpoints {
			if len(e.Host) <= hostRoom {
				short.Endpoints = append(short.Endpoints, e)
			}
		}
		fit, cut = append(fit, &short), append(cut, s)
	}
	if cut == nil {
		return ss, nil
	}
	return fit, cut
}

func (n normalized) equal(o normalized) bool {
	return n.headless == o.headless && slices.Equal(n.ips, o.ips) && slices.Equal(n.ports, o.ports) &&
		slices.EqualFunc(n.endpoints, o.endpoints, func(a, b namedAddrs) bool {
			return a.name == b.name && a.zone == b.zone && a.local == b.local && a.near == b.near && slices.Equal(a.addrs, b.addrs)
		})
}

// closest says which answers at the service's own name and port names hold
// the local cluster's endpoints alone: those of a family (or, for SRV, of
// any) that the local cluster has a ready endpoint of, when the service
// prefers it.
func (n normalized) closest() Closest {
	var c Closest
	for _, e := range n.endpoints {
		if !e.local {
			continue
		}
		var f Closest = ClosestSRV
		for _, a := range e.addrs {
			if a.Is4() {
				f |= ClosestA
			} else {
				f |= ClosestAAAA
			}
		}
		c |= f
		if e.near {
			c |= f << nearShift
		}
	}
	return c
}

// build makes the answers of one service in every zone, with the groupings
// sel asks for.
func build(im *Import, n normalized, zones []string, ttl uint32, sel Selectors) *Service {
	s := &Service{rec: im}
	if srv := srvPorts(n.ports); srv != nil || n.headless {
		s.more = &details{srvPorts: srv, endpoints: n.endpoints}
	}
	if !n.headless {
		return s
	}
	s.more.zones = make([]ZoneAnswers, len(zones))
	for i, zone := range zones {
		s.more.zones[i] = buildZone(im, n, s.SRVPorts(), zone, ttl)
		s.more.zones[i].selections(n.endpoints, sel)
	}
	return s
}

// selections groups the endpoints' answers in z by cluster and by zone, as
// sel asks; endpoints are in name order.
func (z *ZoneAnswers) selections(endpoints []namedAddrs, sel Selectors) {
	add := func(by *map[string]*Selection, value string, e namedAddrs) {
		if *by == nil {
			*by = map[string]*Selection{}
		}
		set := (*by)[value]
		if set == nil {
			set = &Selection{}
			(*by)[value] = set
		}
		set.Endpoints = append(set.Endpoints, z.Sub[e.name])
	}
	for _, e := range endpoints {
		if cluster := clusterOf(e.name); cluster != "" && sel&SelectByCluster != 0 {
			add(&z.ByCluster, cluster, e)
		}
		if e.zone != "" && sel&SelectByZone != 0 {
			add(&z.ByZone, e.zone, e)
		}
	}
	for _, by := range []map[string]*Selection{z.ByCluster, z.ByZone} {
		for _, set := range by {
			set.Shared = sharedAddrs(set.Endpoints)
		}
	}
}

// sharedAddrs returns, when two of endpoints share an address, each of
// their address records once; nil when none is shared. A set makes it
// linear in the number of addresses.
func sharedAddrs(endpoints []*Answers) *Answers {
	unique, shared := &Answers{}, false
	seenA, seenAAAA := map[string]bool{}, map[string]bool{}
	keep := func(rs *[]dns.RR, seen map[string]bool, rr dns.RR, ip net.IP) {
		if seen[string(ip)] {
			shared = true
			return
		}
		seen[string(ip)] = true
		*rs = append(*rs, rr)
	}
	for _, e := range endpoints {
		for _, rr := range e.A {
			keep(&unique.A, seenA, rr, rr.(*dns.A).A)
		}
		for _, rr := range e.AAAA {
			keep(&unique.AAAA, seenAAAA, rr, rr.(*dns.AAAA).AAAA)
		}
	}
	if !shared {
		return nil
	}
	return unique
}

// srvPorts returns the first port of each number, in order, or nil when no
// two ports share a number.
func srvPorts(ports []Port) []Port {
	var out []Port
	for i, p := range ports {
		if slices.ContainsFunc(ports[:i], func(q Port) bool { return q.Port == p.Port }) {
			if out == nil {
				out = slices.Clone(ports[:i])
			}
		} else if out != nil {
			out = append(out, p)
		}
	}
	return out
}

// buildZone makes a headless service's answers in one zone; srv are the
// ports of the SRV records at the service's own name.
func buildZone(im *Import, n normalized, srv []Port, zone string, ttl uint32) ZoneAnswers {
	svcName := ServiceName(im.Name, im.Namespace, zone)
	z := ZoneAnswers{Sub: map[string]*Answers{}, ENT: map[string]struct{}{}, Closest: n.closest()}
	// An endpoint of another cluster keeps its own name; the service's name
	// and port names leave it out of the answers that are the local
	// cluster's alone, and an endpoint of another zone out of those that
	// are the local cluster's in the replica's zone.
	in := func(e namedAddrs, c Closest) bool {
		switch {
		case z.Closest&(c<<nearShift) != 0:
			return e.near
		case z.Closest&c != 0:
			return e.local
		}
		return true
	}
	seen := map[netip.Addr]bool{} // the addresses at the service's name
	var targets []string          // of the endpoints answered at the service's name and port names
	var glue []dns.RR
	for _, e := range n.endpoints {
		target := e.name + "." + svcName
		a, aaaa := addressRecords(target, e.addrs, ttl)
		z.Sub[e.name] = &Answers{A: a, AAAA: aaaa}
		if in(e, ClosestSRV) {
			targets = append(targets, target)
			glue = append(append(glue, a...), aaaa...)
		}
		// The service's name answers each address once, however many
		// endpoints share it: a set, so that a service of many endpoints
		// builds in linear time.
		for _, ip := range e.addrs {
			if (ip.Is4() && !in(e, ClosestA)) || (ip.Is6() && !in(e, ClosestAAAA)) || seen[ip] {
				continue
			}
			seen[ip] = true
			sa, saaaa := addressRecords(svcName, []netip.Addr{ip}, ttl)
			z.Service.A, z.Service.AAAA = append(z.Service.A, sa...), append(z.Service.AAAA, saaaa...)
		}
	}
	for _, p := range n.ports {
		sub := p.Sub()
		ans := &Answers{Extra: glue}
		for _, t := range targets {
			ans.SRV = append(ans.SRV, srvRecord(sub+"."+svcName, ttl, p.Port, t))
		}
		setWeights(ans.SRV)
		z.Sub[sub] = ans
	}
	for _, p := range srv {
		for _, t := range targets {
			z.Service.SRV = append(z.Service.SRV, srvRecord(svcName, ttl, p.Port, t))
		}
	}
	setWeights(z.Service.SRV)
	if len(z.Service.SRV) > 0 {
		z.Service.Extra = glue
	}
	for sub := range z.Sub {
		for i := strings.IndexByte(sub, '.'); i >= 0; i = strings.IndexByte(sub, '.') {
			sub = sub[i+1:]
			z.ENT[sub] = struct{}{}
		}
	}
	for sub := range z.Sub {
		delete(z.ENT, sub) // a name that has records is no empty non-terminal
	}
	return z
}

func addressRecords(name string, ips []netip.Addr, ttl uint32) (a, aaaa []dns.RR) {
	for _, ip := range ips {
		if ip.Is4() {
			v := ip.As4()
			r := A(name, v[:], ttl)
			a = append(a, &r)
		} else {
			v := ip.As16()
			r := AAAA(name, v[:], ttl)
			aaaa = append(aaaa, &r)
		}
	}
	return a, aaaa
}

func srvRecord(owner string, ttl uint32, port uint16, target string) dns.RR {
	r := SRV(owner, ttl, 0, port, target)
	return &r
}

// setWeights spreads the weight evenly over the records of one answer.
func setWeights(rs []dns.RR) {
	for _, r := range rs {
		r.(*dns.SRV).Weight = SRVWeight(len(rs))
	}
}

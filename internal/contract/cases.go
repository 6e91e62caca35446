package contract

// The table asks about the objects of testdata/: in namespace demo the
// ClusterSetIP services web (IPv4) and dual (dual-stack), the headless
// service db with endpoints in clusters west and east.prod, and idle, a
// headless service without ready endpoints; in namespace shop the IPv6
// ClusterSetIP service cart.

// Names of testdata/'s headless endpoints.
var (
	db0West     = N("db-0.west.db.demo")
	ipWest      = N("10-1-0-12.west.db.demo") // no hostname, ready unset
	db0EastProd = N("db-0.east.prod.db.demo")
	v6EastProd  = N("fd00-2--23.east.prod.db.demo") // IPv6 slice, no hostname
	dbGlue      = []string{A(db0West, "10.1.0.11"), A(ipWest, "10.1.0.12"), A(db0EastProd, "10.2.0.21"), AAAA(v6EastProd, "fd00:2::23")}
	dbTargets   = []string{db0West, ipWest, db0EastProd, v6EastProd}
	webGlue     = []string{A(N("web.demo"), "10.42.0.10")}
	dualGlue    = []string{A(N("dual.demo"), "10.42.0.20"), AAAA(N("dual.demo"), "fd00:42::20")}
	cartGlue    = []string{AAAA(N("cart.shop"), "fd00:42::30")}
)

// dbSRV is the SRV answer at owner for the db ports (name, port), one record
// per ready endpoint and port, weight floor(100 / records).
func dbSRV(owner string, ports map[string]int) []string {
	var out []string
	weight := 100 / (len(dbTargets) * len(ports))
	for _, port := range ports {
		for _, target := range dbTargets {
			out = append(out, SRV(owner, weight, port, target))
		}
	}
	return out
}

// Cases cover the contract's bullets on testdata/.
var Cases = []Case{
	// The apex, the schema version and names that do not exist.
	{Apex, "NS", Want{Answer: []string{Apex + " ns ns.dns." + Apex}, Additional: []string{A("ns.dns."+Apex, "127.0.0.1")}}},
	{Apex, "A", NODATA()},
	{Apex, "TXT", NODATA()},
	{"dns-version." + Apex, "TXT", Want{Answer: []string{"dns-version." + Apex + ` txt "1.0.0"`}}},
	{"dns-version." + Apex, "A", NODATA()},
	{"nosuch." + Apex, "A", NXDOMAIN()},
	{"nosuch." + Apex, "TXT", NXDOMAIN()},
	// Empty non-terminals down to the services, and names beside them.
	{"svc." + Apex, "A", NODATA()},
	{"svc." + Apex, "SRV", NODATA()},
	{N("demo"), "A", NODATA()},
	{N("shop"), "AAAA", NODATA()},
	{N("nosuch"), "A", NXDOMAIN()},
	{N("web.nosuch"), "A", NXDOMAIN()},
	{N("nosuch.demo"), "A", NXDOMAIN()},
	{N("cart.demo"), "AAAA", NXDOMAIN()}, // cart is in shop only
	{"web.demo.svc.nosuch." + Apex, "A", NXDOMAIN()},

	// ClusterSetIP, IPv4 only: named ports http/TCP 80 and dns/UDP 53, and an unnamed TCP 8080.
	{N("web.demo"), "A", Want{Answer: []string{A(N("web.demo"), "10.42.0.10")}}},
	{N("web.demo"), "AAAA", NODATA()},
	{N("web.demo"), "TXT", NODATA()},
	{"WeB.DeMo.SVC.clusterset.LOCAL.", "A", Want{Answer: []string{A(N("web.demo"), "10.42.0.10")}}},
	{N("_http._tcp.web.demo"), "SRV", Want{
		Answer:     []string{SRV(N("_http._tcp.web.demo"), 100, 80, N("web.demo"))},
		Additional: webGlue,
	}},
	{N("_dns._udp.web.demo"), "SRV", Want{
		Answer:     []string{SRV(N("_dns._udp.web.demo"), 100, 53, N("web.demo"))},
		Additional: webGlue,
	}},
	{"_HTTP._Tcp.Web.Demo.svc.clusterset.local.", "SRV", Want{
		Answer:     []string{SRV(N("_http._tcp.web.demo"), 100, 80, N("web.demo"))},
		Additional: webGlue,
	}},
	{N("web.demo"), "SRV", Want{
		Answer: []string{
			SRV(N("web.demo"), 50, 80, N("web.demo")),
			SRV(N("web.demo"), 50, 53, N("web.demo")),
		},
		Additional: webGlue,
	}},
	{N("_http._tcp.web.demo"), "A", NODATA()},
	{N("_http._tcp.web.demo"), "TXT", NODATA()},
	{N("_tcp.web.demo"), "SRV", NODATA()}, // empty non-terminal above _http._tcp
	{N("_dns._tcp.web.demo"), "SRV", NXDOMAIN()},
	{N("_http._udp.web.demo"), "SRV", NXDOMAIN()},
	{N("_8080._tcp.web.demo"), "SRV", NXDOMAIN()}, // unnamed ports have no SRV name
	{N("_https._tcp.web.demo"), "SRV", NXDOMAIN()},
	{N("west.web.demo"), "A", NXDOMAIN()}, // cluster names are for headless services
	{N("foo.web.demo"), "A", NXDOMAIN()},
	{N("db-0.west.web.demo"), "A", NXDOMAIN()},

	// ClusterSetIP, dual-stack.
	{N("dual.demo"), "A", Want{Answer: []string{A(N("dual.demo"), "10.42.0.20")}}},
	{N("dual.demo"), "AAAA", Want{Answer: []string{AAAA(N("dual.demo"), "fd00:42::20")}}},
	{N("_http._tcp.dual.demo"), "SRV", Want{
		Answer:     []string{SRV(N("_http._tcp.dual.demo"), 100, 80, N("dual.demo"))},
		Additional: dualGlue,
	}},

	// ClusterSetIP, IPv6 only.
	{N("cart.shop"), "AAAA", Want{Answer: []string{AAAA(N("cart.shop"), "fd00:42::30")}}},
	{N("cart.shop"), "A", NODATA()},
	{N("_grpc._tcp.cart.shop"), "SRV", Want{
		Answer:     []string{SRV(N("_grpc._tcp.cart.shop"), 100, 9090, N("cart.shop"))},
		Additional: cartGlue,
	}},

	// Headless: ready endpoints across both clusters; not-ready ones and
	// plain EndpointSlices (10.9.9.9, 10.9.9.8) never appear.
	{N("db.demo"), "A", Want{Answer: []string{
		A(N("db.demo"), "10.1.0.11"), A(N("db.demo"), "10.1.0.12"), A(N("db.demo"), "10.2.0.21"),
	}}},
	{N("db.demo"), "AAAA", Want{Answer: []string{AAAA(N("db.demo"), "fd00:2::23")}}},
	{N("db.demo"), "TXT", NODATA()},
	{N("_pg._tcp.db.demo"), "SRV", Want{
		Answer:     dbSRV(N("_pg._tcp.db.demo"), map[string]int{"pg": 5432}),
		Additional: dbGlue,
	}},
	{N("_gossip._udp.db.demo"), "SRV", Want{
		Answer:     dbSRV(N("_gossip._udp.db.demo"), map[string]int{"gossip": 7946}),
		Additional: dbGlue,
	}},
	{N("db.demo"), "SRV", Want{
		Answer:     dbSRV(N("db.demo"), map[string]int{"pg": 5432, "gossip": 7946}),
		Additional: dbGlue,
	}},
	{N("_pg._tcp.db.demo"), "A", NODATA()},
	{N("_pg._udp.db.demo"), "SRV", NXDOMAIN()},
	{N("_9999._tcp.db.demo"), "SRV", NXDOMAIN()},

	// Headless endpoint names: <hostname or IP>.<cluster>.<svc>.<ns>.
	{db0West, "A", Want{Answer: []string{A(db0West, "10.1.0.11")}}},
	{db0West, "AAAA", NODATA()},
	{db0West, "SRV", NODATA()},
	{ipWest, "A", Want{Answer: []string{A(ipWest, "10.1.0.12")}}},
	{db0EastProd, "A", Want{Answer: []string{A(db0EastProd, "10.2.0.21")}}},
	{"DB-0.East.Prod.DB.demo.SVC.clusterset.local.", "A", Want{Answer: []string{A(db0EastProd, "10.2.0.21")}}},
	{v6EastProd, "AAAA", Want{Answer: []string{AAAA(v6EastProd, "fd00:2::23")}}},
	{v6EastProd, "A", NODATA()},
	{N("db-2.west.db.demo"), "A", NXDOMAIN()},               // not ready
	{N("10-1-0-13.west.db.demo"), "A", NXDOMAIN()},          // not ready (and it has a hostname)
	{N("10-2-0-22.east.prod.db.demo"), "A", NXDOMAIN()},     // not ready
	{N("10-1-0-11.west.db.demo"), "A", NXDOMAIN()},          // named by its hostname, db-0
	{N("db-0.north.db.demo"), "A", NXDOMAIN()},              // no such cluster
	{N("db-0.prod.db.demo"), "A", NXDOMAIN()},               // "prod" is no cluster
	{N("db-0.east.db.demo"), "A", NXDOMAIN()},               // nor is "east"
	{N("fd00-2--23.west.db.demo"), "AAAA", NXDOMAIN()},      // endpoint of the other cluster
	{N("leak.west.db.demo"), "A", NXDOMAIN()},               // plain EndpointSlice
	{N("stray.west.db.demo"), "A", NXDOMAIN()},              // slice without the service-name label
	{N("10-9-9-9.west.db.demo"), "A", NXDOMAIN()},           // plain EndpointSlice
	{N("db-0.west.db.demo.extra.db.demo"), "A", NXDOMAIN()}, // nonsense below a service
	// Empty non-terminals: the clusters of a headless service.
	{N("west.db.demo"), "A", NODATA()},
	{N("east.prod.db.demo"), "A", NODATA()},
	{N("prod.db.demo"), "A", NODATA()},
	{N("north.db.demo"), "A", NXDOMAIN()},
	{N("db-0.db.demo"), "A", NXDOMAIN()},

	// Headless without ready endpoints: the name does not exist.
	{N("idle.demo"), "A", NXDOMAIN()},
	{N("idle.demo"), "SRV", NXDOMAIN()},
	{N("a.west.idle.demo"), "A", NXDOMAIN()}, // not ready

	// The name server, other types, other subtrees.
	{"ns.dns." + Apex, "A", Want{Answer: []string{A("ns.dns."+Apex, "127.0.0.1")}}},
	{N("web.demo"), "ANY", NODATA()},
	{"web.demo.pod." + Apex, "A", NXDOMAIN()},
}

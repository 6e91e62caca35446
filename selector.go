package multicluster

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// Names that choose where a headless service's answers come from, with the
// grammar of the kubernetes plugin's zonal option:
//
//	<cluster>.pin._cluster.<svc>.<ns>.svc.<zone>     (cluster_selectors)
//	<cluster>.prefer._cluster.<svc>.<ns>.svc.<zone>
//	<zone>.pin._zone.<svc>.<ns>.svc.<zone>           (zonal: an endpoint's topology zone)
//	<zone>.prefer._zone.<svc>.<ns>.svc.<zone>
//
// pin answers the ready endpoints of that cluster (or zone) alone, NODATA
// when it has none of the type asked; prefer answers those, else what the
// service's own name answers. A, AAAA and SRV, the SRV's glue filtered
// alike. The endpoints are grouped by cluster and by zone when the answers
// are built (cache.ZoneAnswers.ByCluster, ByZone, with the options on); the
// records of these names are made per query, so they are in no zone
// transfer. A cluster ID may hold dots: the value is
// everything left of ".pin._cluster".

// selectorKind is how a selector name chooses.
type selectorKind uint8

const (
	selNone   selectorKind = iota
	selPin                 // that set only
	selPrefer              // that set, else every ready endpoint the service's name answers
	selENT                 // pin._cluster, prefer._cluster or _cluster: empty non-terminals
)

// parseSelector reads a sub-name of a service: "<value>.pin._cluster",
// "<value>.prefer._zone" and the like, for the selectors the options turn
// on. It returns selNone for any other sub-name; byZone says whether the
// value is a zone rather than a cluster.
func parseSelector(sub string, cluster, zonal bool) (kind selectorKind, value string, byZone bool) {
	rest, ok := "", false
	if cluster {
		rest, ok = strings.CutSuffix(sub, "._cluster")
		if sub == "_cluster" {
			return selENT, "", false
		}
	}
	if !ok && zonal {
		if rest, ok = strings.CutSuffix(sub, "._zone"); ok {
			byZone = true
		} else if sub == "_zone" {
			return selENT, "", true
		}
	}
	if !ok {
		return selNone, "", false
	}
	if rest == "pin" || rest == "prefer" {
		return selENT, "", byZone
	}
	if value, ok = strings.CutSuffix(rest, ".pin"); ok {
		return selPin, value, byZone
	}
	if value, ok = strings.CutSuffix(rest, ".prefer"); ok {
		return selPrefer, value, byZone
	}
	return selNone, "", false
}

// selected answers a selector name of the headless service svc, whose
// answers in the zone asked are z.
func (m *Multicluster) selected(rep *reply, svc *cache.Service, z *cache.ZoneAnswers, kind selectorKind, value string, byZone bool, qtype uint16) result {
	if kind == selENT {
		return noData
	}
	set := z.ByCluster[value]
	if byZone {
		set = z.ByZone[value]
	}
	res := noData
	if set != nil {
		switch qtype {
		case dns.TypeA, dns.TypeAAAA:
			res = selectedAddrs(rep, set, qtype)
		case dns.TypeSRV:
			res = m.selectedSRV(rep, svc.SRVPorts(), set)
		}
	}
	if res == noData && kind == selPrefer {
		return rep.put(answersFor(&z.Service, qtype))
	}
	return res
}

// selectedAddrs answers the addresses of set of the family of qtype, each
// once, with the query name as owner.
func selectedAddrs(rep *reply, set *cache.Selection, qtype uint16) result {
	of := func(a *cache.Answers) []dns.RR {
		if qtype == dns.TypeAAAA {
			return a.AAAA
		}
		return a.A
	}
	if set.Shared != nil {
		if rs := of(set.Shared); len(rs) > 0 {
			return rep.put(rs, nil, success)
		}
		return noData
	}
	n := 0
	for _, e := range set.Endpoints {
		n += len(of(e))
	}
	if n == 0 {
		return noData
	}
	ans := rep.section(n)
	for _, e := range set.Endpoints {
		ans = rep.appendRecords(ans, of(e), rep.q[0].Name)
	}
	rep.msg.Answer = ans
	return success
}

// selectedSRV answers one SRV record per port number and endpoint of set,
// as the service's name does for all of them, with their addresses as glue.
func (m *Multicluster) selectedSRV(rep *reply, ports []cache.Port, set *cache.Selection) result {
	n := len(set.Endpoints) * len(ports)
	if n == 0 {
		return noData
	}
	addrs := 0
	for _, e := range set.Endpoints {
		addrs += len(e.A) + len(e.AAAA)
	}
	ans, glue := rep.section(n), rep.section(addrs)
	w := cache.SRVWeight(n)
	for _, p := range ports {
		for _, e := range set.Endpoints {
			ans = append(ans, m.srv(rep, rep.q[0].Name, p.Port, w, e.Target(), n-len(ans)))
		}
	}
	for _, e := range set.Endpoints {
		glue = rep.appendRecords(rep.appendRecords(glue, e.A, ""), e.AAAA, "")
	}
	rep.msg.Answer, rep.msg.Extra = ans, glue
	return success
}

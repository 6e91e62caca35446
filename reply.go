package multicluster

import (
	"net"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// reply is a reply with room for its question, its SOA and a few records, so
// that a typical answer costs one allocation. The snapshot's records are
// shared by every query, and plugins such as rewrite and cache edit replies in
// place, so a reply always holds copies: of the records, and of their
// addresses' bytes.
type reply struct {
	msg    dns.Msg
	q      [1]dns.Question
	soa    dns.SOA
	slots  [4]dns.RR
	used   int
	a      []dns.A
	aaaa   []dns.AAAA
	srvs   []dns.SRV
	aBuf   [2]dns.A
	srvB   [2]dns.SRV
	aaaaB  [1]dns.AAAA
	ips    []byte   // the bytes of the addresses of the reply's A and AAAA records
	ipRoom [40]byte // ips' first block: 10 IPv4 addresses, or a dual-stack service's answer and glue
	// glueOf is the ClusterSetIP service whose addresses, at glueName, the
	// additional section holds once the lookup has returned.
	glueOf   *cache.Service
	glueName string
}

// needGlue asks for the addresses of svc at svcName in the additional section.
func (rep *reply) needGlue(svc *cache.Service, svcName string) {
	rep.glueOf, rep.glueName = svc, svcName
}

// newReply answers r as dns.Msg.SetReply does, with AA set.
func newReply(r *dns.Msg) *reply {
	rep := &reply{}
	rep.a, rep.aaaa, rep.srvs = rep.aBuf[:0], rep.aaaaB[:0], rep.srvB[:0]
	rep.ips = rep.ipRoom[:0]
	m := &rep.msg
	m.Id = r.Id
	m.Response = true
	m.Authoritative = true
	m.Opcode = r.Opcode
	if m.Opcode == dns.OpcodeQuery {
		m.RecursionDesired = r.RecursionDesired
		m.CheckingDisabled = r.CheckingDisabled
	}
	if len(r.Question) > 0 {
		rep.q[0] = r.Question[0]
		m.Question = rep.q[:]
	}
	return rep
}

// put copies a lookup's records into the reply when it succeeded, and
// returns its result; the answer's records take the query name as it was
// asked.
func (rep *reply) put(answer, extra []dns.RR, res result) result {
	if res == success {
		rep.msg.Answer = rep.records(answer, rep.q[0].Name)
		rep.msg.Extra = rep.records(extra, "")
	}
	return res
}

// section returns an empty section with room for n records, from the reply's
// own room while it lasts. Its capacity is capped: a plugin that appends to
// one section cannot overwrite the next.
func (rep *reply) section(n int) []dns.RR {
	if n == 0 {
		return nil
	}
	if rep.used+n <= len(rep.slots) {
		s := rep.slots[rep.used : rep.used : rep.used+n]
		rep.used += n
		return s
	}
	return make([]dns.RR, 0, n)
}

// records copies rs into the reply; with an owner, the copies take that name
// (the query name as it was asked).
func (rep *reply) records(rs []dns.RR, owner string) []dns.RR {
	return rep.appendRecords(rep.section(len(rs)), rs, owner)
}

// appendRecords copies rs into the reply as records does, appending the
// copies to out, a section whose room left sizes the blocks clone grows.
func (rep *reply) appendRecords(out, rs []dns.RR, owner string) []dns.RR {
	for _, rr := range rs {
		c := rep.clone(rr, max(cap(out)-len(out), 1))
		if owner != "" {
			c.Header().Name = owner
		}
		out = append(out, c)
	}
	return out
}

// clone copies one record into the reply's room for its type, growing that
// room by a block of at least left records when it is full.
func (rep *reply) clone(rr dns.RR, left int) dns.RR {
	switch v := rr.(type) {
	case *dns.A:
		c := push(&rep.a, *v, left)
		c.A = rep.ip(v.A, left)
		return c
	case *dns.AAAA:
		c := push(&rep.aaaa, *v, left)
		c.AAAA = rep.ip(v.AAAA, left)
		return c
	case *dns.SRV:
		return push(&rep.srvs, *v, left)
	case *dns.SOA:
		if v == &rep.soa {
			return v
		}
	}
	return dns.Copy(rr)
}

// push appends v to buf, in a new block of capacity left when buf is full (the
// records already handed out keep pointing into the old one), and returns
// where v now is.
func push[T any](buf *[]T, v T, left int) *T {
	if len(*buf) == cap(*buf) {
		*buf = make([]T, 0, left)
	}
	*buf = append(*buf, v)
	return &(*buf)[len(*buf)-1]
}

// ip copies an address's bytes into the reply's room for them, growing it by
// a block for at least left addresses of that size when it is full, and
// returns the copy, capped so that appending to it cannot overwrite the next.
func (rep *reply) ip(b net.IP, left int) net.IP {
	if len(rep.ips)+len(b) > cap(rep.ips) {
		rep.ips = make([]byte, 0, left*len(b))
	}
	start := len(rep.ips)
	rep.ips = append(rep.ips, b...)
	return rep.ips[start:len(rep.ips):len(rep.ips)]
}

package multicluster

import "strings"

// nameKind is what a query name is within the zone.
type nameKind int

const (
	kindNone             nameKind = iota // nothing can exist here: NXDOMAIN
	kindApex                             // <zone>
	kindDNSVersion                       // dns-version.<zone>
	kindNSHost                           // ns.dns.<zone>
	kindEmptyNonTerminal                 // dns.<zone> and svc.<zone>: empty non-terminals
	kindNamespace                        // <ns>.svc.<zone>
	kindService                          // <svc>.<ns>.svc.<zone>
	kindSub                              // <sub>.<svc>.<ns>.svc.<zone>
)

// parsedName is a query name taken apart from the right.
type parsedName struct {
	kind      nameKind
	namespace string
	service   string // "<svc>.<ns>", the key of the service
	sub       string // "_<port>._<proto>" or "<host>.<cluster-id>", the cluster ID may hold dots
}

// parseName takes apart a lower-case, fully qualified name inside zone. It
// reads labels from the right, so a cluster ID may contain dots. It does not
// allocate: every part is a substring of name.
func parseName(name, zone string) parsedName {
	if name == zone {
		return parsedName{kind: kindApex}
	}
	if len(name) <= len(zone) || !strings.HasSuffix(name, zone) || name[len(name)-len(zone)-1] != '.' {
		return parsedName{}
	}
	rel := name[:len(name)-len(zone)-1]
	if strings.IndexByte(rel, '\\') >= 0 {
		return parsedName{} // an escaped byte: no name of ours has one
	}
	switch rel {
	case "dns-version":
		return parsedName{kind: kindDNSVersion}
	case "ns.dns":
		return parsedName{kind: kindNSHost}
	case "dns", "svc":
		return parsedName{kind: kindEmptyNonTerminal}
	}
	rest, label := cutLast(rel)
	if label != "svc" || rest == "" {
		return parsedName{}
	}
	rest, ns := cutLast(rest)
	if !isLabel(ns) {
		return parsedName{}
	}
	if rest == "" {
		return parsedName{kind: kindNamespace, namespace: ns}
	}
	// "<svc>.<ns>" is the substring of rel that ends just before ".svc".
	sub, svc := cutLast(rest)
	if !isLabel(svc) {
		return parsedName{}
	}
	key := rel[len(rel)-len(".svc")-len(ns)-1-len(svc) : len(rel)-len(".svc")]
	if sub == "" {
		return parsedName{kind: kindService, namespace: ns, service: key}
	}
	for s := sub; s != ""; {
		var l string
		s, l = cutLast(s)
		if l == "" {
			return parsedName{} // an empty label
		}
	}
	return parsedName{kind: kindSub, namespace: ns, service: key, sub: sub}
}

// cutLast splits off the rightmost label.
func cutLast(s string) (rest, label string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// isLabel reports whether s can be a namespace or service name: an RFC 1123 label.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

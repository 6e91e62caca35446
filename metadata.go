package multicluster

import (
	"context"
	"strings"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/request"
)

// Metadata implements metadata.Provider: for a name of a service in one of
// the plugin's zones it sets multicluster/namespace and multicluster/service,
// for a headless endpoint's name multicluster/cluster, and for a selector
// name (cluster_selectors, zonal) multicluster/cluster or multicluster/zone
// with multicluster/selection (pin or prefer), so that the log plugin can
// print who asked for what.
func (m *Multicluster) Metadata(ctx context.Context, state request.Request) context.Context {
	qname := state.Name()
	if zi := m.zoneOf(qname); zi >= 0 && m.zones[zi].forward >= 0 {
		p := parseName(qname, m.zones[zi].name)
		if p.kind != kindService && p.kind != kindSub {
			return ctx
		}
		svc, _, _ := strings.Cut(p.service, ".")
		metadata.SetValueFunc(ctx, pluginName+"/namespace", func() string { return p.namespace })
		metadata.SetValueFunc(ctx, pluginName+"/service", func() string { return svc })
		if p.kind != kindSub || strings.HasPrefix(p.sub, "_") {
			return ctx
		}
		if kind, value, byZone := parseSelector(p.sub, m.clusterSel, m.zonal); kind != selNone {
			// A selector name: what it chooses by, and how.
			if kind == selENT {
				return ctx
			}
			key, how := "/cluster", "pin"
			if byZone {
				key = "/zone"
			}
			if kind == selPrefer {
				how = "prefer"
			}
			metadata.SetValueFunc(ctx, pluginName+key, func() string { return value })
			metadata.SetValueFunc(ctx, pluginName+"/selection", func() string { return how })
			return ctx
		}
		_, cluster, _ := strings.Cut(p.sub, ".")
		metadata.SetValueFunc(ctx, pluginName+"/cluster", func() string { return cluster })
	}
	return ctx
}

// Command coredns is CoreDNS with every stock plugin and the multicluster
// plugin, whose directive sits just before kubernetes in the plugin chain.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"

	_ "github.com/clustersetdns/multicluster"
)

func init() {
	dnsserver.Directives = insertBefore(dnsserver.Directives, "multicluster", "kubernetes")
}

// insertBefore places directive just before anchor, or last when anchor is absent.
func insertBefore(directives []string, directive, anchor string) []string {
	directives = slices.DeleteFunc(slices.Clone(directives), func(d string) bool { return d == directive })
	i := slices.Index(directives, anchor)
	if i < 0 {
		return append(directives, directive)
	}
	return slices.Insert(directives, i, directive)
}

func main() { coremain.Run() }

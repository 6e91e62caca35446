// Command coredns is CoreDNS with every stock plugin and the multicluster
// plugin, whose directive sits just before kubernetes in the plugin chain.
//
// main.go is the whole command; main_test.go checks the directive's place.
// The image of this binary: the Makefile holds the one build command (make
// coredns; make image with a container engine, make image-tar without), the
// Dockerfile runs it, and hack/image (a module of its own, through
// hack/image.sh) writes the image tarball without a container engine.
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

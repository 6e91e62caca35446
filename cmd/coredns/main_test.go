package main

import (
	"slices"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
)

func TestDirectiveBeforeKubernetes(t *testing.T) {
	i := slices.Index(dnsserver.Directives, "multicluster")
	if i < 0 || i+1 >= len(dnsserver.Directives) || dnsserver.Directives[i+1] != "kubernetes" {
		t.Fatalf("multicluster at %d, want just before kubernetes in %v", i, dnsserver.Directives)
	}
	if n := len(slices.DeleteFunc(slices.Clone(dnsserver.Directives), func(d string) bool { return d != "multicluster" })); n != 1 {
		t.Fatalf("multicluster appears %d times", n)
	}
}

func TestInsertBeforeMissingAnchor(t *testing.T) {
	got := insertBefore([]string{"a", "b"}, "x", "nope")
	if !slices.Equal(got, []string{"a", "b", "x"}) {
		t.Fatalf("got %v", got)
	}
}

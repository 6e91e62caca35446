// Command kubeadmdns prints the CoreDNS objects kubeadm v1.37.2 creates in a
// new cluster (`kubeadm init phase addon coredns --print-manifest`): its
// Deployment, ConfigMap, Service, ClusterRole, ClusterRoleBinding and
// ServiceAccount, rendered by kubeadm's own code from its own templates with
// kubeadm's default cluster configuration. The end-to-end test of
// deploy/in-place.sh loads them as a kubeadm cluster holds them.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/dns"
	configutil "k8s.io/kubernetes/cmd/kubeadm/app/util/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeadmdns:", err)
		os.Exit(1)
	}
}

func run() error {
	// dns.imageTag of kubeadm's ClusterConfiguration: the one-node cluster
	// (hack/cluster.sh) runs kubeadm's objects on stock CoreDNS v1.15.0.
	tag := flag.String("image-tag", "", "kubeadm's dns.imageTag (kubeadm's own default when empty)")
	flag.Parse()
	// kubeadm's defaults: cluster.local, 10.96.0.0/12, registry.k8s.io.
	cfg, err := configutil.DefaultedStaticInitConfiguration()
	if err != nil {
		return err
	}
	cfg.ClusterConfiguration.DNS.ImageTag = *tag
	return dns.EnsureDNSAddon(&cfg.ClusterConfiguration, nil, "", os.Stdout, true)
}

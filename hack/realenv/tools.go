//go:build tools

// Package realenv pins the sources of the control-plane binaries used by the
// integration tests; build them with hack/realenv/build.sh.
//
// The module is kept apart so that k8s.io/kubernetes never becomes a
// dependency of the plugin (go.mod says why). build.sh builds
// kube-apiserver, etcd and kubectl from the Go module proxy into .cache/bin,
// with kubeadm-coredns.yaml beside them (a cold build costs about 15
// CPU-minutes; they are reused while go.mod, go.sum and kubeadmdns are
// unchanged); kubeadmdns/ prints kubeadm's CoreDNS objects as kubeadm's own
// code renders them, for the end-to-end test of deploy/in-place.sh.
package realenv

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

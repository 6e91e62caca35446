//go:build tools

// Package realenv pins the sources of the control-plane binaries used by the
// integration tests; build them with hack/realenv/build.sh.
package realenv

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)

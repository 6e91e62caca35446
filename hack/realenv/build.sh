#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from the Go module proxy into
# .cache/bin (git-ignored), with kubeadm-coredns.yaml beside them: the CoreDNS
# objects kubeadm creates, as its own code renders them (kubeadmdns/), and
# reuses them while hack/realenv/go.{mod,sum} and kubeadmdns are unchanged. A cold build costs about 15 CPU-minutes; it says so while it runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${REALENV_BIN:-$top/.cache/bin}
stamp_want=$(cat "$here/go.mod" "$here/go.sum" "$here/kubeadmdns/main.go" | sha256sum | cut -c1-16)
if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ] && [ -x "$out/kubectl" ] && [ -s "$out/kubeadm-coredns.yaml" ] &&
	[ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp_want" ]; then
	echo "realenv: reusing kube-apiserver, etcd and kubectl in $out"
	exit 0
fi
mkdir -p "$out"
cd "$here"
build() {
	local name=$1 pkg=$2 start=$SECONDS
	echo "realenv: building $name from $pkg (cold builds take minutes; kube-apiserver about 15 CPU-minutes)"
	( while sleep 60; do echo "realenv: still building $name ($((SECONDS - start))s)"; done ) &
	local ticker=$!
	if ! go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "$pkg"; then
		kill "$ticker" 2>/dev/null; exit 1
	fi
	kill "$ticker" 2>/dev/null || true
	mv "$out/$name.tmp" "$out/$name"
	echo "realenv: built $name in $((SECONDS - start))s"
}
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubectl k8s.io/kubernetes/cmd/kubectl
build kubeadmdns ./kubeadmdns
"$out/kubeadmdns" >"$out/kubeadm-coredns.yaml.tmp"
mv "$out/kubeadm-coredns.yaml.tmp" "$out/kubeadm-coredns.yaml"
echo "$stamp_want" > "$out/.stamp"

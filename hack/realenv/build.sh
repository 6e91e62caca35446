#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kubectl from the Go module proxy into
# .cache/bin (git-ignored), with kubeadm-coredns.yaml beside them: the CoreDNS
# objects kubeadm creates, as its own code renders them (kubeadmdns/). With
# --cluster, also the one-node cluster's kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy (hack/cluster.sh). Each is reused
# while hack/realenv/go.{mod,sum}, kubeadmdns and this script are unchanged.
# A cold build costs about 15 CPU-minutes, --cluster about 10 more; it says
# so while it runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${REALENV_BIN:-$top/.cache/bin}
stamp_want=$(cat "$here/build.sh" "$here/go.mod" "$here/go.sum" "$here/kubeadmdns/main.go" | sha256sum | cut -c1-16)
node="kube-controller-manager kube-scheduler kubelet kube-proxy"
bins="etcd kube-apiserver kubectl kubeadmdns"
[ "${1:-}" = --cluster ] && bins="$bins $node"
mkdir -p "$out"
if [ "$(cat "$out/.stamp" 2>/dev/null)" != "$stamp_want" ]; then
	# Built from other sources: none of them is reused.
	for b in etcd kube-apiserver kubectl kubeadmdns $node; do rm -f "$out/$b"; done
	rm -f "$out/kubeadm-coredns.yaml" "$out/.stamp"
fi
todo=()
for b in $bins; do [ -x "$out/$b" ] || todo+=("$b"); done
if [ ${#todo[@]} -eq 0 ] && [ -s "$out/kubeadm-coredns.yaml" ]; then
	echo "realenv: reusing $bins in $out"
	exit 0
fi
cd "$here"
# The version the Kubernetes binaries report (kubectl version, the Node's
# kubeletVersion): what their release builds stamp with -X.
kver=$(awk '$1 == "k8s.io/kubernetes" {print $2}' go.mod)
kmajor=${kver#v}; kmajor=${kmajor%%.*}
kminor=${kver#v*.}; kminor=${kminor%%.*}
kx=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kx="$kx -X $p.gitVersion=$kver -X $p.gitMajor=$kmajor -X $p.gitMinor=$kminor -X $p.gitTreeState=clean"
done
build() {
	local name=$1 pkg=$2 start=$SECONDS x=
	[[ $pkg == k8s.io/kubernetes/* ]] && x=$kx
	echo "realenv: building $name from $pkg (cold builds take minutes; kube-apiserver about 15 CPU-minutes)"
	( while sleep 60; do echo "realenv: still building $name ($((SECONDS - start))s)"; done ) &
	local ticker=$!
	if ! go build -trimpath -ldflags "-s -w$x" -o "$out/$name.tmp" "$pkg"; then
		kill "$ticker" 2>/dev/null; exit 1
	fi
	kill "$ticker" 2>/dev/null || true
	mv "$out/$name.tmp" "$out/$name"
	echo "realenv: built $name in $((SECONDS - start))s"
}
for b in "${todo[@]}"; do
	case $b in
	etcd) build etcd go.etcd.io/etcd/server/v3 ;;
	kubeadmdns) build kubeadmdns ./kubeadmdns ;;
	*) build "$b" "k8s.io/kubernetes/cmd/$b" ;;
	esac
done
"$out/kubeadmdns" >"$out/kubeadm-coredns.yaml.tmp"
mv "$out/kubeadm-coredns.yaml.tmp" "$out/kubeadm-coredns.yaml"
echo "$stamp_want" > "$out/.stamp"

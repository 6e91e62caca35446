#!/usr/bin/env bash
# Adds the multicluster plugin to the cluster's own CoreDNS (kubeadm's layout
# by default), or takes it out again. A thin wrapper for those with a
# checkout and Go: it builds cmd/in-place of this repository and runs it from
# the directory it was called from. deploy/in-place/install.yaml and
# uninstall.yaml run the same command as a Job, from the project's image.
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: deploy/in-place.sh install --image IMAGE [flags]
       deploy/in-place.sh uninstall [--force] [flags]
       deploy/in-place.sh corefile [--zone ZONE] < Corefile > Corefile.new

install    binds the rules of deploy/rbac.yaml to CoreDNS's ServiceAccount in a
           ClusterRole and ClusterRoleBinding of their own
           (coredns-multicluster-in-place; system:coredns is not touched), sets the
           coredns container's image to IMAGE (CoreDNS built with the multicluster
           plugin) and waits for the rollout, then adds "multicluster
           clusterset.local" before the kubernetes directive of the Corefile
           (ConfigMap coredns). The originals are kept in the ConfigMap
           coredns-multicluster-in-place. Run again, it only sets the image.
uninstall  restores the Corefile and the image, then deletes the ClusterRole and
           ClusterRoleBinding; refuses when the Corefile or the image changed since
           install (--force restores anyway).
corefile   offline: prints the edited Corefile of stdin (exit 2 and the reason
           on stderr when it will not edit it), for Helm or k3s installs.

flags (kubeadm's defaults):
  --kubeconfig FILE --context NAME   as kubectl (default: $KUBECONFIG, ~/.kube/config)
  --namespace kube-system --configmap coredns --key Corefile
  --deployment coredns --container coredns
  --zone clusterset.local
  --dry-run          print what would change, change nothing
  --wait 5m          how long to wait for the rollout (0: do not wait)

needs: go (the version in go.mod). Without Go or a checkout, the Jobs of
deploy/in-place/ run the same command in the cluster from the image:
  kubectl apply -f deploy/in-place/install.yaml. See deploy/README.md.
USAGE
}

case "${1:-}" in
install | uninstall | corefile) ;;
-h | --help | help)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Built from the repository root, run from here: relative --kubeconfig paths
# and stdin stay the caller's, and the exit code (2: refused) is the command's.
(cd "$root" && GOWORK=off go build -buildvcs=false -o "$tmp/in-place" ./cmd/in-place)
"$tmp/in-place" "$@"

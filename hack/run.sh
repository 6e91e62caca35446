#!/usr/bin/env bash
# Runs the plugin against a real kube-apiserver on this machine, for trying
# it out: etcd and kube-apiserver on 127.0.0.1, the objects of testdata/, and
# the project's CoreDNS serving clusterset.local on 127.0.0.1:1053 as the
# plugin's least-privilege identity. It prints dig commands to try and runs
# until Ctrl-C or SIGTERM, then stops everything.
#
# The first run builds kube-apiserver, etcd and kubectl from source
# (hack/realenv/build.sh: about 20 minutes on 2 cores); later runs reuse them.
# Arguments go to test/e2e/cmd/devenv: -port, -ttl, -testdata DIR, -v.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off

if ! command -v dig >/dev/null; then
	echo "run: installing dig (apt-get install bind9-dnsutils)"
	sudo=
	if [ "$(id -u)" != 0 ]; then sudo="sudo -n"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends bind9-dnsutils >/dev/null
fi

hack/realenv/build.sh

echo "run: building test/e2e/cmd/devenv"
mkdir -p .cache
(cd test/e2e && go build -o "$top/.cache/devenv" ./cmd/devenv)
export E2E_REPO_ROOT=$top
exec "$top/.cache/devenv" "$@"

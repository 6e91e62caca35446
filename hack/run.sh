#!/usr/bin/env bash
# Runs the plugin on this machine, for trying it out: clusterset.local on
# 127.0.0.1:1053, answering the objects of testdata/, from two sources in turn.
#
# 1. Within minutes, even on a first run: test/e2e/cmd/devenv/snapshot.go
#    feeds the objects straight to the plugin's snapshot builder and answers
#    with the plugin's handler in CoreDNS's DNS server. No API server yet.
# 2. Meanwhile kube-apiserver, etcd and kubectl build (hack/realenv/build.sh,
#    about 15 CPU-minutes the first time, log in .cache/run-realenv.log;
#    later runs reuse them). Then devenv starts etcd and kube-apiserver on
#    127.0.0.1, loads the objects through the API, and starts the project's
#    CoreDNS watching it as the plugin's least-privilege identity, which takes
#    the port over from the snapshot server without losing a query.
#
# It prints dig commands to try and runs until Ctrl-C or SIGTERM, then stops
# everything. Arguments go to both servers: -port, -ttl, -testdata DIR, -v.
# REALENV_BIN, when set, is where the control-plane binaries are built and
# found (default .cache/bin).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off
mkdir -p .cache

if ! command -v dig >/dev/null; then
	echo "run: installing dig (apt-get install bind9-dnsutils)"
	sudo=
	if [ "$(id -u)" != 0 ]; then sudo="sudo -n"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends bind9-dnsutils >/dev/null
fi

# Until devenv takes over, this script owns the snapshot server and the
# build, and stops them (the build by its process group) however it ends.
snap= build=
cleanup() {
	if [ -n "$build" ]; then kill -- "-$build" 2>/dev/null || true; fi
	if [ -n "$snap" ]; then kill "$snap" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Built from the plugin's module, which holds CoreDNS, before anything else
# takes the CPU: this is what answers first.
echo "run: building the testdata server (test/e2e/cmd/devenv/snapshot.go)"
dev=test/e2e/cmd/devenv
go build -o .cache/devenv-snapshot "$dev/snapshot.go" "$dev/shared.go"
.cache/devenv-snapshot "$@" &
snap=$!

log=.cache/run-realenv.log
echo "run: building kube-apiserver, etcd and kubectl in the background, about 15 CPU-minutes unless built already (log: $log)"
# Its own session, so that stopping it reaches the go builds under it; only
# its own progress lines come through.
setsid bash -c 'set -o pipefail
	hack/realenv/build.sh 2>&1 | tee "$1" | { grep --line-buffered "^realenv:" || true; }' - "$log" &
build=$!
# Whichever ends first: the build, or the snapshot server, which then
# failed. wait, unlike a foreground command, lets Ctrl-C and SIGTERM in.
status=0 ended=
wait -n -p ended "$snap" "$build" || status=$?
if [ "$ended" = "$snap" ]; then
	snap=
	echo "run: the testdata server stopped" >&2
	exit 1
fi
build=
if [ "$status" != 0 ]; then
	echo "run: building kube-apiserver, etcd or kubectl failed; see $log" >&2
	exit 1
fi

echo "run: building test/e2e/cmd/devenv"
(cd test/e2e && go build -o "$top/.cache/devenv" ./cmd/devenv)
export E2E_REPO_ROOT=$top
trap - EXIT INT TERM
# devenv, this same process, inherits the snapshot server as its child.
exec "$top/.cache/devenv" -takeover "$snap" "$@"

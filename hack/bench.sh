#!/usr/bin/env bash
# Benchmarks the project's CoreDNS against stock CoreDNS v1.15.0 and prints a
# table (docs/benchmarks.md explains it). In one run, side by side:
#   floor  stock CoreDNS v1.15.0 answering with the whoami plugin;
#   stock  stock CoreDNS v1.15.0's kubernetes plugin, `multicluster
#          clusterset.local`, on v1alpha1 ServiceImports;
#   ours   CoreDNS with this plugin (./cmd/coredns) on v1alpha2 ServiceImports;
# each against a real etcd and kube-apiserver on 127.0.0.1 holding 2,000
# ClusterSetIP imports and one headless import of 3 clusters × 40 endpoints.
# Every server runs with GOMAXPROCS=1 on CPU 1, dnsperf on CPU 0.
#
# Usage: hack/bench.sh [-rounds 5] [-duration 10s] [-scale] [-pprof] [other
# flags of the driver in test/e2e/bench: .cache/bench/bench -h lists them]. -scale adds,
# at 10,000 and then 100,000 imports (-scale-imports 10000,100000), stock's and
# ours' time to ready and memory: VmRSS, RssAnon, VmHWM, and the Go heap from
# the prometheus plugin. Compare RssAnon and the Go heap (a table gives
# ours/stock): VmRSS also counts the binary's pages in the page cache, which
# vary from run to run. At the largest number it measures write-to-answer
# propagation latency at 100 writes/s. About 7.5 minutes (17 to 21 with -scale,
# 7 to 10 of them loading 100,000 imports into each of two control planes) once
# the binaries are built; docs/benchmarks.md explains the method and shows a run.
#
# hack/bench.sh -qps=false -scale -in-cluster -stock-storage v1beta1 -starts 3
# -prop-duration 10s measures, at each -scale-imports, what the MCS stanza adds to a CoreDNS that
# also serves `kubernetes cluster.local` (the in-place install's layout):
# stock's multicluster option against ours, each less the same binary without
# it, all on stock's control plane; CPU to ready, memory, and CPU under the
# -prop-rate and -prop-es-rate writes. About 13 minutes at 10,000 and 100,000 imports.
#
# hack/bench.sh -soak 1000000 runs the long churn instead (no QPS, no -scale):
# one replica of ours on its own control plane while 16 writers make that many
# creates, updates and deletes of the ServiceImports and EndpointSlices of
# 3,000 services (-soak-services); every 100,000 writes (-soak-every) it pauses,
# forces a GC in the server and reads VmRSS, RssAnon, the Go heap, goroutines
# and open fds, and at the end compares every answer with what the API server
# holds (exit status 1 if one differs); -charts docs/bench writes soak.svg.
# About 40 minutes for 1,000,000 writes here (about 440 writes a second).
#
# It installs dnsperf and dig with apt-get when missing, builds kube-apiserver,
# etcd and kubectl once (hack/realenv/build.sh), stock CoreDNS once (about 5
# CPU-minutes, hack/stock.sh) into .cache/bench/, and the project's CoreDNS every run.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off
out=$top/.cache/bench
mkdir -p "$out"
start=$SECONDS
# One benchmark at a time: two would share the servers' CPU.
exec 9>"$out/.lock"
if ! flock -n 9; then
	echo "bench: another hack/bench.sh is running (it holds $out/.lock)" >&2
	exit 1
fi

missing=()
command -v dnsperf >/dev/null || missing+=(dnsperf)
command -v dig >/dev/null || missing+=(bind9-dnsutils)
command -v taskset >/dev/null || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench: installing ${missing[*]} (apt-get)"
	sudo=
	if [ "$(id -u)" != 0 ]; then sudo="sudo -n"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$(nproc)" -lt 2 ]; then
	echo "bench: needs 2 CPUs (the servers on CPU 1, dnsperf on CPU 0); this machine has $(nproc)" >&2
	exit 1
fi

hack/realenv/build.sh

# Stock CoreDNS v1.15.0, built once (hack/stock.sh).
stock=$(hack/stock.sh)

echo "bench: building the project's CoreDNS (./cmd/coredns) and the benchmark driver"
go build -trimpath -o "$out/coredns-ours" ./cmd/coredns
(cd test/e2e && go build -o "$out/bench" ./bench)
echo "bench: binaries ready ($((SECONDS - start))s)"

E2E_REPO_ROOT=$top "$out/bench" -repo "$top" -ours "$out/coredns-ours" -stock "$stock" "$@"
echo "bench: done in $((SECONDS - start))s"

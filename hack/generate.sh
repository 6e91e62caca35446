#!/usr/bin/env bash
# Regenerates every generated file of the repository:
#   - apis/v1alpha2/zz_generated.deepcopy.go (controller-gen object);
#   - deploy/crds/multicluster.x-k8s.io_serviceimports.yaml: the ServiceImport
#     CRD of sigs.k8s.io/mcs-api (read from the Go module, at the version the
#     plugin's go.mod requires) plus the v1alpha2 version controller-gen
#     generates from apis/v1alpha2 (served, not storage);
#   - deploy/crds-v1alpha2-storage/multicluster.x-k8s.io_serviceimports.yaml:
#     the same with v1alpha2 as the storage version;
#   - deploy/monitoring/: the Grafana dashboard (JSON, and a ConfigMap for
#     Grafana's dashboard sidecar) and the Prometheus alerting rules (a rules
#     file for promtool, and a PrometheusRule), from hack/tools/monitoring,
#     whose queries name the metrics through package metricname.
#
# Usage: hack/generate.sh [DIR]
# writes them under DIR (the repository when omitted) at the same relative
# paths; hack/test.sh generates into a temporary DIR and compares.
#
# controller-gen is built from hack/tools (its own module, so the plugin's
# go.mod never carries controller-tools) into .cache/tools, and rebuilt only
# when hack/tools/go.mod or go.sum change.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off
out=${1:-$top}
mkdir -p "$out"
out=$(cd "$out" && pwd)

tools=$top/.cache/tools
gen=$tools/controller-gen
sum=$(cat hack/tools/go.mod hack/tools/go.sum | sha256sum | cut -d' ' -f1)
if [ ! -x "$gen" ] || [ "$(cat "$gen.sum" 2>/dev/null)" != "$sum" ]; then
	echo "generate: building controller-gen (hack/tools)" >&2
	mkdir -p "$tools"
	rm -f "$gen.sum"
	(cd hack/tools && go build -o "$gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
	echo "$sum" >"$gen.sum"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$out/apis/v1alpha2"
"$gen" object paths=./apis/... output:object:dir="$out/apis/v1alpha2"
"$gen" crd paths=./apis/... output:crd:dir="$tmp"

file=multicluster.x-k8s.io_serviceimports.yaml
(cd hack/tools && go run ./crdgen \
	-gomod "$top/go.mod" \
	-v1alpha2 "$tmp/$file" \
	-o "$out/deploy/crds/$file" \
	-o-v1alpha2-storage "$out/deploy/crds-v1alpha2-storage/$file")

(cd hack/tools && go run ./monitoring -o "$out")

#!/usr/bin/env bash
# Builds stock CoreDNS v1.15.0 once into .cache/bench/coredns-stock-v1.15.0
# and prints its path (messages go to stderr). It is reused while its
# -version says CoreDNS-1.15.0. hack/bench.sh measures it; hack/test.sh
# passes it to the end-to-end tests as E2E_STOCK_COREDNS (TestParityWithStock).
#
# Stock CoreDNS v1.15.0: hack/stock requires CoreDNS v1.15.0, with the k8s.io
# patch release the rest of the project uses, so its code is CoreDNS's as
# released. It is rebuilt when hack/stock/go.sum changes. The first build
# takes about 5 CPU-minutes (modules from the Go module proxy).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
export GOWORK=off
out=$top/.cache/bench
stock=$out/coredns-stock-v1.15.0
mkdir -p "$out"
# One build at a time (hack/bench.sh and hack/test.sh may run together).
exec 8>"$out/.stock.lock"
flock 8

sum=$(sha256sum "$top/hack/stock/go.sum" | cut -d' ' -f1)
if [ -x "$stock" ] && [ "$(cat "$stock.go.sum" 2>/dev/null)" = "$sum" ] &&
	"$stock" -version 2>/dev/null | grep -q '^CoreDNS-1.15.0$'; then
	echo "stock: reusing $stock" >&2
else
	echo "stock: building stock CoreDNS v1.15.0 from the Go module proxy (a few minutes, once)" >&2
	(cd "$top/hack/stock" && go build -trimpath -o "$stock.tmp" github.com/coredns/coredns) >&2
	mv "$stock.tmp" "$stock"
	echo "$sum" >"$stock.go.sum"
fi
echo "$stock"

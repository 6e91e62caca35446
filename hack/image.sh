#!/usr/bin/env bash
# Builds the container image without a container engine:
#   1. the static CoreDNS binary, into .cache/, with the Makefile's coredns
#      target, as the Dockerfile builds it (needs make);
#   2. the in-place command (cmd/in-place), static, with the Makefile's
#      in-place target, for the Jobs of deploy/in-place;
#   3. the image, with hack/image (go-containerregistry, a module of its own):
#      an empty base plus /coredns and /in-place, user 65532, ENTRYPOINT ["/coredns"],
#      written as a `docker save` tarball.
# Prints the tarball's path last. Load it with either of
#   docker load -i .cache/coredns-multicluster.tar
#   ctr -n k8s.io image import .cache/coredns-multicluster.tar
# Environment: IMAGE (the image's name, ghcr.io/clustersetdns/coredns-multicluster:0.1.0),
# OUT (the tarball), SOURCE_DATE_EPOCH (every timestamp; the last commit's time
# by default, so one commit gives one image digest), GOOS/GOARCH (cross builds).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off
image=${IMAGE:-ghcr.io/clustersetdns/coredns-multicluster:0.1.0}
out=${OUT:-$top/.cache/coredns-multicluster.tar}
bin=$top/.cache/coredns-static
inplace=$top/.cache/in-place-static
mkdir -p "$top/.cache"

revision=
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	revision=$(git rev-parse HEAD)
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		revision=$revision-dirty
	fi
	: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct)}"
	export SOURCE_DATE_EPOCH
fi

echo "building $bin (make coredns)" >&2
make --no-print-directory coredns BIN="$bin" >&2
echo "building $inplace (make in-place)" >&2
make --no-print-directory in-place IN_PLACE="$inplace" >&2

echo "writing the image $image" >&2
(cd hack/image && go run . -binary "$bin" -in-place "$inplace" -o "$out" -tag "$image" -revision "$revision") >&2
echo "$out"

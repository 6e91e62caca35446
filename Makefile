# CoreDNS with the multicluster plugin, and its container image.
#
#   make coredns     bin/coredns (or BIN=path): static; the Dockerfile and hack/image.sh build with it
#   make in-place    bin/in-place (or IN_PLACE=path): the in-place command, static, for the image
#   make image       the image, with a container engine (docker build)
#   make image-tar   the same image without an engine: .cache/coredns-multicluster.tar,
#                    for `docker load -i` or `ctr -n k8s.io image import` (hack/image.sh)
#
# Tests: hack/test.sh. The end-to-end tests build the image tarball too
# (test/e2e/image_test.go).

IMAGE  ?= ghcr.io/clustersetdns/coredns-multicluster:0.1.0
DOCKER ?= docker

export GOWORK := off

.PHONY: coredns in-place image image-tar clean

# The build of CoreDNS with the plugin, defined here alone: the Dockerfile
# and hack/image.sh run this target, with BIN set, so all three build alike.
BIN = bin/coredns
coredns:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$(BIN)" ./cmd/coredns

# The in-place command (cmd/in-place), which the image carries as /in-place
# for the Jobs of deploy/in-place.
IN_PLACE = bin/in-place
in-place:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$(IN_PLACE)" ./cmd/in-place

image:
	@$(DOCKER) info >/dev/null 2>&1 || { \
		echo "no container engine answers '$(DOCKER) info': 'make image-tar' builds the image without one" >&2; \
		exit 1; }
	$(DOCKER) build -t $(IMAGE) \
		--label org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) .

image-tar:
	IMAGE=$(IMAGE) hack/image.sh

clean:
	rm -rf bin .cache/coredns-static .cache/in-place-static .cache/coredns-multicluster.tar

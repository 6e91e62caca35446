# syntax=docker/dockerfile:1
# CoreDNS with the multicluster plugin: a static binary on distroless, run as
# the nonroot user 65532. `make image` builds it where a container engine runs;
# `make image-tar` (hack/image.sh) builds the same image without one.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
ENV GOWORK=off GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The Makefile's `coredns` target, as hack/image.sh runs it too (golang's
# image has make).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH make coredns in-place BIN=/out/coredns IN_PLACE=/out/in-place
# Port 53 is privileged: with this file capability user 65532 may bind it
# wherever the runtime keeps NET_BIND_SERVICE in the bounding set
# (deploy/deployment.yaml adds it after dropping ALL). As upstream CoreDNS's image.
RUN command -v setcap >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends libcap2-bin >/dev/null; }; \
    setcap cap_net_bind_service=+ep /out/coredns

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="coredns-multicluster" \
      org.opencontainers.image.description="CoreDNS with the multicluster plugin: the Kubernetes Multi-Cluster Services zone clusterset.local" \
      org.opencontainers.image.source="https://github.com/clustersetdns/multicluster"
# BuildKit sets owner and mode first, then copies the xattrs: the capability stays.
COPY --from=build --chown=65532:65532 --chmod=0755 /out/coredns /coredns
# The in-place command, which the Jobs of deploy/in-place run.
COPY --from=build --chown=65532:65532 --chmod=0755 /out/in-place /in-place
USER 65532:65532
# distroless's nonroot variant works in /home/nonroot; CoreDNS's relative
# paths (the default -conf Corefile) start at / as in the engine-less image.
WORKDIR /
EXPOSE 53/udp 53/tcp
ENTRYPOINT ["/coredns"]

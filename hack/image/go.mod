// Module image writes the container image of CoreDNS with the multicluster
// plugin without a container engine. It is a module of its own so that
// go-containerregistry never becomes a dependency of the plugin.
module github.com/clustersetdns/multicluster/hack/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)

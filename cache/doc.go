// Package cache watches ServiceImports and multi-cluster EndpointSlices and
// keeps, for every imported service, an immutable set of precomputed DNS
// answers. It knows client-go and the API types; it does not know CoreDNS.
//
// Words: an import (Import) is the slim copy of one ServiceImport as one view
// (API version) reads it, a slice (Slice) the slim copy of one multi-cluster
// EndpointSlice; a record is always a DNS resource record.
//
// One concern a file:
//
//   - slim.go: the slim copies a view keeps of each ServiceImport, packed
//     (112 bytes an import), the labels and the ServiceImport resource and
//     versions.
//   - typed.go: each ServiceImport version's REST client, decoding every
//     object on its own into the version's Go type (mcs-api's v1beta1 and
//     v1alpha1, apis/v1alpha2 for v1alpha2), so that one object that does
//     not fit is left out and the rest are listed.
//   - convert.go: typed objects and EndpointSlices to slim copies, and why one
//     is unusable (the reasons of the skipped metric); interning of the
//     strings many slim copies share.
//   - store.go: a view's store: its reflector writes the slim imports there,
//     keyed as the index is, and every change is told to the controller.
//   - controller.go: the configuration (Config), the EndpointSlice informer
//     and the loop that runs the rest (Controller).
//   - views.go: one watch per shape of ServiceImport, moved to the versions
//     served.
//   - served.go: which ServiceImport versions the API server serves, from
//     discovery, asked when the one CRD (watched by name) changes.
//   - retry.go: lists and watches that wait out an unreachable API server or
//     refused access, and say so once per outage.
//   - rebuild.go: one service rebuilt from what the views and slices hold.
//   - choose.go: which view's import answers a service: a pure function,
//     tabled in choose_test.go.
//   - local.go: the local cluster (the Config's ClusterID, or the
//     ClusterProperty cluster.clusterset.k8s.io, watched by name), whose
//     endpoints a headless service that prefers close endpoints answers.
//   - report.go: problems with an object, reported once per write.
//   - stats.go: the SOA serial and the counts behind the metrics.
//   - build.go: the immutable answers of a service, headless records
//     precomputed.
//   - rr.go: the shape of every record, for the answers and the handler
//     alike: header and TTL, A, AAAA, SRV and its weight, the service's
//     name.
//   - index.go: the sharded index the handler reads.
//   - static.go: answers built once from objects, typed or read from YAML,
//     for tests, benchmarks and devenv's list of dig commands; ReadImport,
//     the one reader of a ServiceImport outside the watches.
//
// Tests: the _test.go files mostly test the file of the same name;
// versions_test.go the versions read and the moves between them, gone_test.go
// an expired watch, churn_test.go reads during changes, fuzz_test.go holds
// FuzzObjectToRecords, and memory_bench_test.go and decode_bench_test.go the
// benchmarks of heap per import, one change among N and the decoding of a
// list page (docs/benchmarks.md).
package cache

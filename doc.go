// Package multicluster is a CoreDNS plugin that serves the Kubernetes
// Multi-Cluster Services DNS zone (clusterset.local) from ServiceImports and
// multi-cluster EndpointSlices, as KEP-1645's DNS specification describes.
// The README describes it for operators; this comment describes its files.
//
// The package is the CoreDNS side: the Corefile, the query and the reply. The
// watches and the answers they build are package cache's; the package reads
// them through the Backend interface and never calls the API server while
// answering.
//
//   - plugin.go: the plugin and its zones (Multicluster, servedZone), the
//     Backend it reads answers from, and the defaults of the options.
//   - backend.go: NewWithBackend, the plugin over a Backend it is given,
//     with no controller, for hack/run.sh's snapshot server.
//   - setup.go: the Corefile (every option of the README's Syntax, each
//     error naming its line) and the controller's start and shutdown.
//   - handler.go: one query: the zone, the name parsed, looked up, the reply
//     written (ServeDNS), with its result for the metrics.
//   - parse.go: the query-name parser, which reads a name from the right
//     (zone, svc, namespace, service, then port or endpoint labels).
//   - reply.go: the reply, with copies of the cached records made into it, so
//     that the shared answers are never modified.
//   - clustersetip.go: ClusterSetIP answers, made per query from the
//     service's addresses and ports, and the glue of SRV answers.
//   - reverse.go: PTR answers in the reverse zones given among ZONES.
//   - xfr.go: zone transfers (AXFR, and IXFR as AXFR or the SOA alone), for
//     the transfer plugin.
//   - notify.go: NOTIFY to the transfer plugin's secondaries when the serial
//     moves, at most once a second per zone.
//   - metadata.go: multicluster/namespace, /service and /cluster for the
//     metadata plugin.
//   - metrics.go: the plugin's metrics, declared under the names of package
//     metricname.
//   - klog.go: client-go's logs through the plugin's logger.
//
// Tests: handler_test.go asks the handler every question of the DNS contract
// (package internal/contract) about the objects of testdata/;
// fixture_test.go builds the objects of the other tests; parse_test.go holds
// FuzzParseName; handler_bench_test.go the ServeDNS benchmarks
// (docs/benchmarks.md); the other _test.go files test the file of the same
// name, and ns_test.go, local_test.go and oddquery_test.go the name server's
// addresses, local-cluster-first answers and odd queries.
package multicluster

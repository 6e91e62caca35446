// Package e2e runs the plugin's CoreDNS against a real kube-apiserver and
// etcd, and asks it questions with dig; hack/test.sh runs it with the race
// detector's CoreDNS, the image tarball and stock CoreDNS v1.15.0. The
// package holds test files only, besides this comment; the servers come from
// package harness, and cmd/devenv is what hack/run.sh runs.
//
// main_test.go starts what every test shares: one control plane holding the
// objects of testdata/ (never changed by a test; tests that change objects
// use namespaces of their own), one CoreDNS binary and the plugin's
// least-privilege identity; helpers_test.go holds the shared helpers. The
// tests, by file:
//
//   - The DNS contract and its neighbours: contract_test.go (every question of
//     internal/contract, with dig), conformance_test.go (mcs-api's conformance
//     suite's DNS specs, beside the kubernetes plugin), parity_test.go (TestParityWithStock: stock CoreDNS
//     v1.15.0 and ours over one fixture, every difference one that
//     docs/kubernetes-plugin.md lists), lifecycle_test.go (objects created,
//     changed and deleted), badobjects_test.go (the unusable objects of
//     docs/operations.md), local_test.go (local cluster first).
//   - The Corefile: options_test.go (ttl, fallthrough),
//     kubernetes_options_test.go (the options the kubernetes plugin offers
//     for the zone: transfer, reverse zones, namespaces, metadata, labels), example_test.go (Corefile.example as shipped),
//     neighbours_test.go (dnssec, tls, cache), secondary_test.go (zone
//     transfers to BIND, the serial across restarts and replicas),
//     reload_test.go (reload leaks nothing).
//   - ServiceImport versions: versions_test.go (the versions read for each
//     CRD), migration_rig_test.go (what the migration tests share, on the
//     harness's rig: harness.Rig, which the tests of the API server
//     misbehaving use too),
//     migration_test.go, migration_upstream_test.go,
//     migration_v1alpha2_test.go and migration_upgrade_test.go (the paths of
//     docs/migrations.md, and an upgrade over upstream's CRD, under steady
//     queries).
//   - The API server misbehaving: outage_test.go, restart_test.go,
//     partition_test.go, etcdloss_test.go, throttle_test.go,
//     privilege_test.go (too few permissions), quiet_test.go (the requests of
//     an idle replica, and with the coredns chart's rules), rbac_test.go (the identity is least privilege).
//   - Installing: deploy_test.go (deploy/'s manifests), chart_test.go and
//     chartvalues_test.go (the chart, and the official coredns chart's
//     values), forwarding_test.go (every snippet of deploy/forwarding.md),
//     image_test.go (the image; runc_test.go has what chartvalues_test.go
//     needs to run it under runc),
//     monitoring_test.go (the metrics the dashboard and rules read exist).
//   - In a cluster: the package cluster (hack/cluster.sh's one node), run by
//     hack/test.sh after this one.
package e2e

// Package harness starts etcd, kube-apiserver and the project's CoreDNS on
// 127.0.0.1 for end-to-end tests, and asks CoreDNS questions with dig.
//
// The binaries are real: kube-apiserver and etcd from .cache/bin
// (hack/realenv/build.sh), CoreDNS built from ./cmd/coredns, or the image
// run under runc as a pod (package sandbox). The tests of test/e2e,
// test/e2e/cmd/devenv (hack/run.sh) and the bench (hack/bench.sh) all start
// their servers here.
//
//   - env.go: the control plane (Options, Env, Start): etcd and
//     kube-apiserver with RBAC on 127.0.0.1, the CRDs of deploy/crds, admin
//     clients, free ports.
//   - objects.go: objects applied as unstructured (Apply, ApplyAll).
//   - mcs.go: ServiceImports in any version's shape (Import, Object) and MCS
//     EndpointSlices (MCSSlice, Endpoint), written as a controller does
//     (WriteImport).
//   - crd.go: the ServiceImport CRD of deploy/ and its storage version
//     (ServiceImportCRD, SetStorage, KeepVersions).
//   - identity.go: users with their own client certificates, bound to a
//     ClusterRole; PluginIdentity binds the one of deploy/rbac.yaml and
//     nothing else.
//   - coredns.go: CoreDNS built (BuildCoreDNS, or E2E_COREDNS) and run with a
//     Corefile (StartCoreDNS, RunCoreDNS), with the prometheus and pprof
//     plugins as options.
//   - metrics.go: a Prometheus endpoint scraped with expfmt (Scrape,
//     Metrics.Value, ScrapeValue).
//   - proc.go: process memory and CPU time, CPU and load, through
//     prometheus/procfs.
//   - answers.go: writes timed until DNS answers them (AnswerWatcher).
//   - dig.go: dig run and its answer parsed (Dig, DigResult), and one
//     exchange through miekg/dns (Exchange).
//   - eventually.go: Eventually and Poll, the waits of tests of changes.
//   - restart.go: kube-apiserver restarted, etcd killed and compacted.
//   - innetns.go: a function run inside a network namespace (InNetns).
//   - audit.go: the API server's audit log, for counting a user's requests.
//   - repo.go: the plugin's checkout (RepoRoot; E2E_REPO_ROOT overrides it).
package harness

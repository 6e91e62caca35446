// Package harness starts etcd, kube-apiserver and the project's CoreDNS on
// 127.0.0.1 for end-to-end tests, and asks CoreDNS questions with dig.
//
// The binaries are real: kube-apiserver and etcd from .cache/bin
// (hack/realenv/build.sh), CoreDNS built from ./cmd/coredns, or the image
// run under runc as a pod (package sandbox). The tests of test/e2e,
// test/e2e/cmd/devenv (hack/run.sh) and the bench (hack/bench.sh) all start
// their servers here. rig.go is the tests' one rig: a CoreDNS under steady
// lookups (Prober), for a change or fault to be played under. Each file's
// first declaration says what it holds.
package harness

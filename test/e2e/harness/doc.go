// Package harness starts etcd, kube-apiserver and the project's CoreDNS on
// 127.0.0.1 for end-to-end tests, and asks CoreDNS questions with dig.
package harness

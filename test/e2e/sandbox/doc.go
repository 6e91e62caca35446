// Package sandbox runs the project's image as the kubelet would, for the
// end-to-end tests alone: unpacked and run under runc in a pod's network
// namespace, with the API server forwarded into it (runc.go, pod.go), and a
// network namespace behind a veth pair whose packets can be dropped, for a
// network partition (netns.go). It needs root, runc, iproute2 and iptables.
// The harness, which the bench shares, knows nothing of it.
//
//   - runc.go: the image unpacked (UnpackImage) and run under runc
//     (StartRunc), a TCP address forwarded into a network namespace.
//   - pod.go: a Deployment's container run under runc as the kubelet would
//     start it (StartPod), with its probes.
//   - netns.go: a network namespace joined by a veth pair (NewNetns), its
//     packets to a port dropped and allowed again.
package sandbox

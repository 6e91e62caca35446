#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine, from upstream parts:
#   hack/cluster.sh up                  start it; the last line printed is
#                                       KUBECONFIG=<an admin kubeconfig>
#   hack/cluster.sh down                stop it and leave nothing behind
#   hack/cluster.sh load IMAGE.tar NAME make an image tarball available on the
#                                       node as NAME
#   hack/cluster.sh images              the images it holds, one a line:
#                                       project NAME, stock NAME, client NAME
#
# Parts: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as
# processes of this machine; the node (containerd, kubelet, kube-proxy) as
# processes in a network namespace of its own (multicluster-node), joined to
# this machine by one veth pair. All from the Go module proxy
# (hack/realenv/build.sh) but for Debian's containerd, runc and CNI plugins
# (ptp and host-local), which it installs with apt-get when missing. No
# registry: the images are built without an engine (hack/image) and imported
# into containerd.
#
# Out of the box it runs kubeadm's CoreDNS objects, rendered by kubeadm's own
# code (hack/realenv/kubeadmdns) with dns.imageTag v1.15.0, on stock CoreDNS
# v1.15.0's image, behind the kube-dns Service 10.96.0.10 that the kubelet
# writes into every pod's resolv.conf (search list, ndots:5).
#
# Addresses: this machine 172.31.250.1/30 (kube-apiserver on :6443, and
# dnsmasq on :53 as the node's upstream resolver: NXDOMAIN for all), the node
# 172.31.250.2/30, pods 10.244.0.0/24, Services 10.96.0.0/12.
# Everything it keeps is in CLUSTER_DIR (.cache/cluster) and /run/multicluster-cluster;
# kube-apiserver's audit log (every request, Metadata level) is CLUSTER_DIR/audit.log.
# Environment: CLUSTER_DIR; SHORT_TOKENS=1 (kube-apiserver extends no
# projected token, so a pod that asks for ten-minute tokens gets them and the
# kubelet rotates them).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
export GOWORK=off
dir=${CLUSTER_DIR:-$top/.cache/cluster}
run=/run/multicluster-cluster
bin=${REALENV_BIN:-$top/.cache/bin}
images=$top/.cache/cluster-images
netns=multicluster-node
host_ip=172.31.250.1
node_ip=172.31.250.2
pod_cidr=10.244.0.0/24
node=node
etcd_port=23790

project_image=ghcr.io/clustersetdns/coredns-multicluster:0.1.0
stock_image=registry.k8s.io/coredns/coredns:v1.15.0
client_image=localhost/multicluster-client:1

sock=$run/containerd.sock
kubeconfig=$dir/admin.kubeconfig
export PATH=$bin:$PATH

say() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }
ctr_() { ctr --address "$sock" --namespace k8s.io "$@"; }
innode=(nsenter --net="/run/netns/$netns" --)
innode() { "${innode[@]}" "$@"; }
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# until SECONDS WHAT CMD...: runs CMD until it succeeds, for at most SECONDS.
until_ok() {
	local limit=$1 what=$2 t0=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS - t0 >= limit)); then
			die "$what: not after ${limit}s (logs: $dir/logs)"
		fi
		sleep 0.2
	done
}

# start NAME [nsenter] CMD...: runs CMD in the background as its own session,
# logging to $dir/logs/NAME.log, its pid in $run/NAME.pid.
start() {
	local name=$1
	shift
	setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$run/$name.pid"
}

alive() { [ -s "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }

# normalize NAME: the name the container runtime gives an image reference
# (docker.io/library/ for a bare name, :latest for none).
normalize() {
	local n=$1 first=${1%%/*}
	if [[ $n != */* ]]; then
		n=docker.io/library/$n
	elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
		n=docker.io/$n
	fi
	[[ ${n##*/} == *[:@]* ]] || n=$n:latest
	echo "$n"
}

need_packages() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/ptp ] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
	dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
	command -v dig >/dev/null || missing+=(bind9-dnsutils)
	command -v openssl >/dev/null || missing+=(openssl)
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]} (apt-get install)"
	[ "$(id -u)" = 0 ] || die "need root to apt-get install ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The three images, as tarballs in $images, built when missing or stale.
build_images() {
	mkdir -p "$images"
	say "the project's image (hack/image.sh)"
	OUT=$images/project.tar IMAGE=$project_image "$top/hack/image.sh" >/dev/null

	# Stock CoreDNS v1.15.0 as its release image holds it: one static binary
	# (CGO_ENABLED=0) as /coredns, user 65532.
	local stock=$images/coredns-stock-static sum
	sum=$(sha256sum "$top/hack/stock/go.sum" | cut -c1-16)
	if [ ! -s "$images/stock.tar" ] || [ "$(cat "$images/stock.stamp" 2>/dev/null)" != "$sum" ]; then
		say "stock CoreDNS v1.15.0, static, and its image"
		(cd "$top/hack/stock" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$stock" github.com/coredns/coredns)
		(cd "$top/hack/image" && go run . -binary "$stock" -o "$images/stock.tar" -tag "$stock_image" \
			-title coredns -description "stock CoreDNS v1.15.0, for the one-node cluster") >/dev/null
		echo "$sum" >"$images/stock.stamp"
	fi

	# The client: dig and glibc's getent with the libraries they load, and
	# busybox (nslookup, sh); it is the pod sandbox's image too.
	local root=$images/client-rootfs f
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/etc" "$root/tmp"
	for f in /usr/bin/dig /usr/bin/getent $( (ldd /usr/bin/dig; ldd /usr/bin/getent) | grep -o '/[^ ]*' | sort -u); do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
	cp /bin/busybox "$root/bin/busybox"
	for f in sh sleep nslookup cat ls grep; do ln -s busybox "$root/bin/$f"; done
	echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
	printf 'root:x:0:0:root:/:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	(cd "$top/hack/image" && go run . -rootfs "$root" -o "$images/client.tar" -tag "$client_image" \
		-entrypoint /bin/busybox -entrypoint sh -entrypoint -c \
		-entrypoint "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait \$!; done") >/dev/null
}

certs() {
	local p=$dir/pki
	mkdir -p "$p"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
		-keyout "$p/ca.key" -out "$p/ca.crt" -subj /CN=multicluster-cluster-ca 2>/dev/null
	openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
	openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
	# leaf NAME SUBJECT [SANS]
	leaf() {
		local ext="keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth"
		[ -n "${3:-}" ] && ext="$ext\nsubjectAltName=$3"
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$p/$1.key" -subj "$2" 2>/dev/null |
			openssl x509 -req -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 365 -out "$p/$1.crt" \
				-extfile <(printf "$ext") 2>/dev/null
	}
	leaf apiserver /CN=kube-apiserver \
		"IP:$host_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	leaf apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	leaf admin "/O=system:masters/CN=kubernetes-admin"
	leaf controller-manager /CN=system:kube-controller-manager
	leaf scheduler /CN=system:kube-scheduler
	leaf kubelet "/O=system:nodes/CN=system:node:$node"
	leaf kubelet-serving "/CN=$node" "IP:$node_ip,DNS:$node"
	leaf proxy /CN=system:kube-proxy
	local who
	for who in admin controller-manager scheduler kubelet proxy; do
		kubeconfig_for "$who" >"$dir/$who.kubeconfig"
	done
}

kubeconfig_for() {
	local p=$dir/pki
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: multicluster
  cluster:
    server: https://$host_ip:6443
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$p/$1.crt")
    client-key-data: $(base64 -w0 "$p/$1.key")
contexts:
- name: multicluster
  context: {cluster: multicluster, user: $1}
current-context: multicluster
EOF
}

# The kernel settings the kubelet changes (it sets them when
# protectKernelDefaults is false), saved by up and put back by down.
kernel_settings="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

network() {
	ip netns add "$netns"
	ip link add mc-host type veth peer name mc-node
	ip link set mc-node netns "$netns"
	ip addr add "$host_ip/30" dev mc-host
	ip link set mc-host up
	innode ip link set lo up
	innode ip addr add "$node_ip/30" dev mc-node
	innode ip link set mc-node up
	innode ip route add default via "$host_ip"
	innode sysctl -qw net.ipv4.ip_forward=1
	ip route add "$pod_cidr" via "$node_ip" dev mc-host
	printf 'nameserver %s\n' "$host_ip" >"$dir/node-resolv.conf"
	# The node's upstream resolver, for CoreDNS's "forward . /etc/resolv.conf":
	# dnsmasq on this machine's side of the veth, answering NXDOMAIN for every
	# name, as the public DNS answers for clusterset.local. Nothing leaves the
	# machine.
	start dnsmasq dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
		--listen-address="$host_ip" --bind-interfaces --address=/#/ --pid-file="$run/dnsmasq.pidfile"
}

containerd_up() {
	mkdir -p "$dir/containerd" "$dir/cni/net.d"
	cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$run/containerd"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$client_image"
  # This VM refuses a negative oom_score_adj (../shared/REALENV.md).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
EOF
	cat >"$dir/cni/net.d/10-multicluster.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "multicluster",
  "plugins": [
    {"type": "ptp", "mtu": 1500,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
              "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	start containerd "${innode[@]}" containerd --config "$dir/containerd/config.toml"
	until_ok 60 "containerd" ctr_ version
	local t
	for t in project stock client; do
		load_tar "$images/$t.tar" "$(image_name "$t")"
	done
}

image_name() {
	case $1 in
	project) echo "$project_image" ;;
	stock) echo "$stock_image" ;;
	client) echo "$client_image" ;;
	esac
}

# load_tar TAR NAME: imports TAR and names its image NAME.
load_tar() {
	local tar=$1 want out got
	want=$(normalize "$2")
	out=$(ctr_ images import --no-unpack=false "$tar" 2>&1) || die "importing $tar: $out"
	got=$(sed -n 's/^unpacking \(.*\) (sha256:.*/\1/p' <<<"$out" | head -1)
	[ -n "$got" ] || die "importing $tar: no image in it ($out)"
	if [ "$got" != "$want" ]; then
		ctr_ images tag --force "$got" "$want" >/dev/null
	fi
	say "image $want (from $(basename "$tar"))"
}

control_plane_up() {
	local p=$dir/pki ttl=()
	if [ -n "${SHORT_TOKENS:-}" ]; then
		# Projected tokens live as long as the pod asks: kube-apiserver would
		# extend the default one to a year.
		ttl=(--service-account-extend-token-expiration=false)
	fi
	start etcd etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
		--advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls http://127.0.0.1:0 \
		--log-level warn
	# Who asked what, when (Metadata level): the tests read it for how often
	# CoreDNS's ServiceAccount calls the API server.
	printf 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n' >"$dir/audit-policy.yaml"
	start kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address "$host_ip" --advertise-address "$host_ip" --secure-port 6443 \
		--tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
		--kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--service-cluster-ip-range 10.96.0.0/12 --authorization-mode Node,RBAC \
		--kubelet-preferred-address-types InternalIP \
		--audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" --audit-log-format json \
		--audit-log-mode blocking \
		--enable-admission-plugins NodeRestriction --allow-privileged "${ttl[@]}"
	until_ok 120 "kube-apiserver ready" kc get --raw /readyz
	start kube-controller-manager kube-controller-manager --kubeconfig "$dir/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
		--cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key"
	start kube-scheduler kube-scheduler --kubeconfig "$dir/scheduler.kubeconfig" \
		--authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false
}

node_up() {
	local p=$dir/pki
	mkdir -p "$dir/kubelet" "$dir/pod-logs" "$dir/kubelet-plugins"
	cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1; kubelet 1.35 and later refuse it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
address: $node_ip
healthzPort: 0
readOnlyPort: 0
tlsCertFile: $p/kubelet-serving.crt
tlsPrivateKeyFile: $p/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $p/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
resolvConf: $dir/node-resolv.conf
failSwapOn: false
# Nothing evicted or collected for want of disk: this is a test machine.
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: $dir/pod-logs
volumePluginDir: $dir/kubelet-plugins
serializeImagePulls: false
EOF
	start kubelet "${innode[@]}" kubelet --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
		--root-dir "$dir/kubelet" --hostname-override "$node" --node-ip "$node_ip"
	cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/proxy.kubeconfig}
hostnameOverride: $node
bindAddress: $node_ip
clusterCIDR: 10.244.0.0/16
mode: iptables
# The node is a network namespace: the host's conntrack table is not its own.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
EOF
	start kube-proxy "${innode[@]}" kube-proxy --config "$dir/kube-proxy.yaml"
	until_ok 120 "node $node Ready" kc wait --for=condition=Ready "node/$node" --timeout=1s
}

dns_up() {
	kubeadmdns -image-tag v1.15.0 >"$dir/kubeadm-coredns.yaml"
	kc apply -f "$dir/kubeadm-coredns.yaml" >/dev/null
	kc -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null ||
		die "kubeadm's CoreDNS did not roll out (kubectl -n kube-system describe pods)"
}

up() {
	[ "$(id -u)" = 0 ] || die "needs root (network namespaces, containerd, the kubelet)"
	if alive kube-apiserver && alive kubelet; then
		say "already up"
		echo "KUBECONFIG=$kubeconfig"
		return
	fi
	if [ -e "$run" ] || ip netns list | grep -qw "$netns"; then
		say "a cluster was left half up; taking it down first"
		down
	fi
	local t0=$SECONDS
	need_packages
	"$top/hack/realenv/build.sh" --cluster >&2
	build_images
	say "starting (images and binaries ready after $((SECONDS - t0))s)"
	mkdir -p "$dir/logs" "$run"
	local k
	for k in $kernel_settings; do echo "$k=$(sysctl -n "$k")"; done >"$run/kernel-settings"
	# What the parts make outside $dir and $run, when it is not there yet:
	# down takes it away again.
	[ -e /var/log/containers ] || echo /var/log/containers >>"$run/made"
	[ -e /run/containerd ] || echo /run/containerd >>"$run/made"
	findmnt -rn /run/netns >/dev/null || echo /run/netns >>"$run/made"
	# The pods' network namespaces that are not this cluster's: down keeps
	# these and takes every other one away, also those of a sandbox whose
	# task was gone before down (a teardown the kubelet's stop cut short).
	{ ls /run/netns 2>/dev/null | grep '^cni-' || true; } >"$run/netns-before"
	certs
	network
	containerd_up
	control_plane_up
	node_up
	dns_up
	say "up in $((SECONDS - t0))s"
	echo "KUBECONFIG=$kubeconfig"
}

# The network namespace inodes of the tasks containerd runs: the pods'.
pod_netns_inodes() {
	local pid
	for pid in $(ctr_ tasks ls 2>/dev/null | awk 'NR > 1 {print $2}'); do
		stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null || true
	done
}

stop_pid() {
	local name=$1 pid
	[ -s "$run/$name.pid" ] || return 0
	pid=$(cat "$run/$name.pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$run/$name.pid"
}

down() {
	[ "$(id -u)" = 0 ] || die "needs root"
	local inodes="" id ns
	stop_pid kubelet
	stop_pid kube-proxy
	if [ -S "$sock" ]; then
		inodes=$(pod_netns_inodes)
		for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
		for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
	fi
	stop_pid containerd
	# The shims of this containerd, should any outlive it.
	pkill -KILL -f "containerd-shim.* -address $sock" 2>/dev/null || true
	for ns in /run/netns/cni-*; do
		[ -e "$ns" ] || continue
		if grep -qx "$(stat -L -c %i "$ns" 2>/dev/null)" <<<"$inodes" ||
			{ [ -e "$run/netns-before" ] && ! grep -qx "${ns##*/}" "$run/netns-before"; }; then
			umount "$ns" 2>/dev/null || true
			rm -f "$ns"
		fi
	done
	local m
	for m in $(findmnt -rn -o TARGET | grep -E "^($dir|$run)(/|$)" | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	for name in kube-scheduler kube-controller-manager kube-apiserver etcd dnsmasq; do stop_pid "$name"; done
	ip netns del "$netns" 2>/dev/null || true
	ip link del mc-host 2>/dev/null || true
	local cg
	for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	if [ -s "$run/kernel-settings" ]; then
		while IFS= read -r kv; do sysctl -qw "$kv" || true; done <"$run/kernel-settings"
	fi
	# The kubelet links each container's log into /var/log/containers.
	find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null || true
	if [ -s "$run/made" ]; then
		while IFS= read -r made; do
			if [ "$made" = /run/netns ]; then
				[ -n "$(ls -A /run/netns 2>/dev/null)" ] || { umount /run/netns 2>/dev/null; rmdir /run/netns 2>/dev/null; } || true
			else
				rm -rf "$made"
			fi
		done <"$run/made"
	fi
	rm -rf "$run" "$dir"
	say "down"
}

case ${1:-} in
up) up ;;
down) down ;;
load)
	[ $# = 3 ] || die "usage: hack/cluster.sh load IMAGE.tar NAME"
	[ -S "$sock" ] || die "the cluster is not up (hack/cluster.sh up)"
	load_tar "$2" "$3"
	;;
images)
	for t in project stock client; do echo "$t $(image_name "$t")"; done
	;;
*)
	sed -n '2,9s/^# \{0,1\}//p' "$0" >&2
	exit 2
	;;
esac

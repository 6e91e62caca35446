#!/usr/bin/env bash
# Runs every check of the repository and exits non-zero when any fails:
#   - gofmt over all tracked and untracked Go files (.cache excluded);
#   - go vet and go test -race for the plugin's module;
#   - promtool check rules and promtool test rules on the alerting rules of
#     deploy/monitoring (promtool from Debian's prometheus package);
#   - go vet for the end-to-end module (test/e2e);
#   - go build -race of CoreDNS with the plugin (./cmd/coredns);
#   - the end-to-end tests: real etcd and kube-apiserver (built from source by
#     hack/realenv/build.sh into .cache/bin, about 20 minutes the first time on
#     2 cores, reused afterwards), the project's CoreDNS, dig, and stock
#     CoreDNS v1.15.0 (hack/stock.sh, built once into .cache/bench, about 5
#     CPU-minutes) for the parity check against it (TestParityWithStock);
#   - the one-node cluster (hack/cluster.sh up; its first start builds its
#     images and, with the other binaries, kubelet, kube-proxy,
#     kube-controller-manager and kube-scheduler) and the tests that run in it
#     (test/e2e/cluster), then hack/cluster.sh down, and a check that it left
#     nothing on the machine.
# No test may be skipped: it exports MULTICLUSTER_NO_SKIP=1, under which a
# test that lacks a tool, privilege or binary fails, saying which, rather than
# skipping (missing, in test/e2e/helpers_test.go); and it fails when a go test log
# (all run with -v) shows any test skipped, naming each with its reason.
# It installs dig (bind9-dnsutils), promtool (prometheus), runc, ip (iproute2), iptables,
# dnsmasq (dnsmasq-base), named (bind9), named-checkzone (bind9-utils),
# kzonecheck (knot-dnssecutils), kdig (knot-dnsutils) and a C compiler for -race when missing, with
# apt-get when run as root. Full logs go to .cache/test-logs/.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export GOWORK=off
# Read by every test that would skip for want of something (noSkip, in test/e2e/helpers_test.go):
# here it fails instead. The project's own name rather than CI: CI runs this
# script, so its runs have it; systems give CI different values ("true", "1",
# a name), which is how the tests came to read it differently; and a
# developer's run of this script should not pose as CI to other tools.
export MULTICLUSTER_NO_SKIP=1
logs=$top/.cache/test-logs
mkdir -p "$logs"
start=$SECONDS
failed=()

step() { printf '\n== %s\n' "$*"; }
fail() { failed+=("$1"); echo "FAILED: $1"; }

apt_install() {
	local sudo=
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null; then sudo="sudo -n"; else
			echo "need root to apt-get install $*" >&2
			return 1
		fi
	fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v dig >/dev/null; then
	step "installing dig (apt-get install bind9-dnsutils)"
	apt_install bind9-dnsutils
fi
if ! command -v promtool >/dev/null; then
	step "installing promtool (apt-get install prometheus)"
	apt_install prometheus
fi
# The image under a container runtime as the kubelet starts it (runc, in a
# network namespace of its own: ip), and kube-dns's forwarder (dnsmasq) for
# the forwarding snippets of deploy/forwarding.md.
missing=()
command -v runc >/dev/null || missing+=(runc)
command -v ip >/dev/null || missing+=(iproute2)
# Network partitions are made by dropping packets on a veth pair (iptables).
command -v iptables >/dev/null || missing+=(iptables)
command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
# What zone transfers are checked against: BIND as a secondary (named), and
# the zone checkers named-checkzone and Knot's kzonecheck.
command -v named >/dev/null || missing+=(bind9)
command -v named-checkzone >/dev/null || missing+=(bind9-utils)
command -v kzonecheck >/dev/null || missing+=(knot-dnssecutils)
# DNS over TLS is asked with Knot's kdig.
command -v kdig >/dev/null || missing+=(knot-dnsutils)
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]} (apt-get install)"
	apt_install "${missing[@]}"
fi
if ! command -v "$(go env CC)" >/dev/null; then
	step "installing a C compiler for go test -race (apt-get install gcc libc6-dev)"
	apt_install gcc libc6-dev
fi

# Prints a go test log's result lines: packages, and tests that did not pass
# (all tests with -v).
results() { grep -E '^(ok|FAIL|---|panic:)|^\s+--- (FAIL|SKIP)' "$1" || true; }

# skipped LOG: prints each test a go test -v log shows skipped ("--- SKIP:"),
# with the last message it logged, which is t.Skip's reason. go test -v heads
# each test's lines with "=== RUN|CONT|NAME <test>"; a message starts
# "    file.go:line: ".
skipped() {
	awk '
		/^=== (RUN|CONT|NAME) / { test = $3; next }
		/^    [^ ].*\.go:[0-9]+: / && test != "" { said[test] = substr($0, 5); next }
		/^ *--- SKIP: / { print "  " $3 (($3 in said) ? ": " said[$3] : "") }
	' "$1"
}

# messages LOG: prints, for each test a go test -v log shows failed, the
# last 20 messages it logged (their first lines; neither what CoreDNS
# logged nor the Corefile and output a failed test appends), so that the
# summary at the end shows why without the whole log.
messages() {
	awk '
		/^=== (RUN|CONT|NAME) / { test = $3; next }
		/^ +[^ ].*\.go:[0-9]+: (CoreDNS: |--- Corefile$)/ { next }
		/^ +[^ ].*\.go:[0-9]+: / && test != "" { n[test]++; said[test, n[test] % 20] = $0; next }
		/^ *--- FAIL: / {
			t = $3; print "--- " t
			for (i = (n[t] > 20 ? n[t] - 19 : 1); i <= n[t]; i++) print said[t, i % 20]
		}
	' "$1"
}
digest=

# gotest NAME DIR ARGS...: runs go test in DIR, logging to $logs/NAME.log,
# and fails when a test was skipped (seen only with -v).
gotest() {
	local name=$1 dir=$2 log=$logs/$1.log t0=$SECONDS skips
	shift 2
	step "go test $* ($dir)"
	if (cd "$dir" && go test "$@") >"$log" 2>&1; then
		results "$log"
	else
		cat "$log"
		fail "$name (log: $log)"
		digest+=$(printf '\n== why %s failed: the last messages of each failed test\n' "$name"; messages "$log")
	fi
	skips=$(skipped "$log")
	if [ -n "$skips" ]; then
		echo "skipped, where nothing may be:"
		echo "$skips"
		fail "$name: skipped tests (log: $log)"
	fi
	echo "($((SECONDS - t0))s)"
}

step "gofmt -l"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard -- '*.go' | grep -v '^\.cache/' || true)
else
	mapfile -t gofiles < <(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*' | sed 's|^\./||')
fi
existing=()
for f in "${gofiles[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if [ ${#existing[@]} -eq 0 ]; then
	echo "no Go files"
else
	unformatted=$(gofmt -l "${existing[@]}")
	if [ -n "$unformatted" ]; then
		echo "not gofmt-ed:"
		echo "$unformatted"
		fail gofmt
	else
		echo "${#existing[@]} files formatted"
	fi
fi

step "go vet ./... (plugin)"
go vet ./... || fail "go vet (plugin)"
# hack/run.sh's snapshot server is built from the plugin's module, outside ./...
go vet ./test/e2e/cmd/devenv/snapshot.go ./test/e2e/cmd/devenv/shared.go || fail "go vet (devenv snapshot)"

# hack/generate.sh writes into a temporary directory; every file it writes
# must be byte for byte the one in the tree.
step "generated files are up to date (hack/generate.sh)"
gendir=$(mktemp -d)
if hack/generate.sh "$gendir" >"$logs/generate.log" 2>&1; then
	stale=()
	while IFS= read -r f; do
		cmp -s "$gendir/$f" "$f" || stale+=("$f")
	done < <(cd "$gendir" && find . -type f | sed 's|^\./||' | sort)
	if [ ${#stale[@]} -gt 0 ]; then
		for f in "${stale[@]}"; do diff -u "$f" "$gendir/$f" | head -40 || true; done
		echo "differ from what hack/generate.sh gives (run it): ${stale[*]}"
		fail "generated files"
	else
		(cd "$gendir" && find . -type f | sed 's|^\./|  |' | sort)
	fi
else
	cat "$logs/generate.log"
	fail "hack/generate.sh (log: $logs/generate.log)"
fi
rm -rf "$gendir"

# The alerting rules hack/generate.sh writes, and their unit tests: each alert
# fires, and does not, on series shaped like what the plugin exports.
step "alerting rules (promtool check rules, promtool test rules)"
(cd deploy/monitoring/prometheus &&
	promtool check rules coredns-multicluster.rules.yaml &&
	promtool test rules coredns-multicluster.rules_test.yaml) || fail "promtool (deploy/monitoring/prometheus)"

# Before the unit tests: cmd/in-place checks its rules against kubeadm's own
# ClusterRole, which this build renders (.cache/bin/kubeadm-coredns.yaml).
step "etcd and the Kubernetes binaries (hack/realenv/build.sh)"
t0=$SECONDS
realenv_ok=true
hack/realenv/build.sh || { realenv_ok=false; fail "hack/realenv/build.sh"; }
echo "($((SECONDS - t0))s)"

gotest unit . -race -count=1 -v -timeout 20m ./...

step "fuzzing, 20s a target (go test -fuzz)"
gotest fuzz-name . -run '^$' -fuzz '^FuzzParseName$' -fuzztime 20s .
gotest fuzz-objects . -run '^$' -fuzz '^FuzzObjectToRecords$' -fuzztime 20s ./cache
gotest fuzz-corefile . -run '^$' -fuzz '^FuzzEditCorefile$' -fuzztime 20s ./cmd/in-place

step "go vet ./... (test/e2e)"
(cd test/e2e && go vet ./...) || fail "go vet (test/e2e)"

step "go vet ./... (hack/image)"
(cd hack/image && go vet ./...) || fail "go vet (hack/image)"
gotest image hack/image -count=1 -v ./...

# The binary of the image, built exactly as the Dockerfile builds it
# (CGO_ENABLED=0, -trimpath, -ldflags "-s -w"), packed into the image tarball
# that the end-to-end tests read back and run.
step "CoreDNS as the Dockerfile builds it, and its image (hack/image.sh)"
t0=$SECONDS
image_tar=$(hack/image.sh) || { image_tar=; fail "hack/image.sh"; }
echo "($((SECONDS - t0))s)"

# With the race detector: its packages are in the build cache from go test
# -race already, and the end-to-end tests fail on any race CoreDNS reports.
step "CoreDNS with the plugin (go build -race ./cmd/coredns)"
t0=$SECONDS
coredns_ok=true
go build -race -o .cache/coredns-e2e-race ./cmd/coredns || { coredns_ok=false; fail "go build ./cmd/coredns"; }
echo "($((SECONDS - t0))s)"


# Stock CoreDNS v1.15.0, built once as hack/bench.sh builds it, for
# TestParityWithStock, which compares its answers with ours.
step "stock CoreDNS v1.15.0 (hack/stock.sh)"
t0=$SECONDS
stock=$(hack/stock.sh) || { stock=; fail "hack/stock.sh"; }
echo "($((SECONDS - t0))s)"

if $coredns_ok && $realenv_ok; then
	E2E_COREDNS=$top/.cache/coredns-e2e-race E2E_IMAGE_TAR=$image_tar E2E_STOCK_COREDNS=$stock \
		gotest e2e test/e2e -count=1 -v -timeout 20m $(cd test/e2e && go list ./... | grep -v /cluster$)
fi

# What a cluster could leave on this machine: processes, mounts, network
# namespaces, links, iptables and nftables rules, cgroups.
machine_state() {
	{ ps -eo args= | grep -E '^[^ ]*(etcd|kube-[a-z-]+|kubelet|containerd|containerd-shim[^ ]*) ' | grep -v grep | sort; } || true
	findmnt -rn -o TARGET | sort || true
	ip netns list 2>/dev/null | sort || true
	ip -o link show | awk -F': ' '{print $2}' | sort || true
	{ iptables-save 2>/dev/null | grep -v '^[#:]' | sort; } || true
	nft list ruleset 2>/dev/null || true
	ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null || true
}

# The one-node cluster of upstream parts (hack/cluster.sh): the in-place
# Jobs, pods that resolve through the cluster DNS Service. Then it is taken
# down, and nothing may be left.
if $realenv_ok; then
	step "the one-node cluster (hack/cluster.sh up)"
	t0=$SECONDS
	state_before=$(machine_state)
	if up=$(hack/cluster.sh up 2>"$logs/cluster-up.log"); then
		tail -3 "$logs/cluster-up.log"
		echo "($((SECONDS - t0))s)"
		E2E_CLUSTER_KUBECONFIG=${up##*KUBECONFIG=} gotest cluster test/e2e -count=1 -v -timeout 40m ./cluster/
	else
		cat "$logs/cluster-up.log"
		fail "hack/cluster.sh up (log: $logs/cluster-up.log)"
	fi
	step "hack/cluster.sh down, and nothing left behind"
	hack/cluster.sh down || fail "hack/cluster.sh down"
	# Only what is there now and was not before counts: a process of the
	# end-to-end tests may still have been ending when the first was taken.
	left=$(comm -13 <(echo "$state_before" | sort) <(machine_state | sort))
	if [ -n "$left" ]; then
		echo "$left"
		fail "hack/cluster.sh down left the lines above"
	else
		echo "nothing left: processes, mounts, network namespaces, links, iptables and nftables rules, cgroups"
	fi
fi

[ -z "$digest" ] || echo "$digest"
step "summary ($((SECONDS - start))s)"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "all checks passed"

#!/usr/bin/env bash
# Regenerates every table and chart of docs/benchmarks.md. The page holds
# the commands itself, each in a marker before the block it fills, the block
# ending at <!-- end -->:
#   <!-- bench NAME: FLAGS -->  hack/bench.sh FLAGS: the run's tables (and,
#                               with -charts, its charts)
#   <!-- summary: NAME... -->   the summaries of those runs, one table
#   <!-- go test: ARGS -->      go test ARGS: its benchmarks, one row a run
# Usage: hack/bench-docs.sh [-page FILE] [NAME...]: with names (a run's, or
# "go" for every go test), only those are made again. After each command
# every block is filled from the newest output of its command, kept in
# .cache/bench/docs (BENCH_DOCS_STORE); a block whose command never ran is
# left as it is. A failed command stops it: the blocks of the commands
# before stay filled, with the charts they wrote, and its own block keeps
# the output of its last success.
# Everything, on a quiet machine: about 80 minutes here.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
page=$top/docs/benchmarks.md
if [ "${1:-}" = -page ]; then
	page=$(realpath "$2")
	shift 2
fi
cd "$top"
export GOWORK=off
dir=$(dirname "$page")
store=${BENCH_DOCS_STORE:-$top/.cache/bench/docs}
mkdir -p "$store"
only=" $* "
want() { [ "$only" = "  " ] || [[ $only == *" $1 "* ]]; }
# specOf is a marker's command: what stands between "<!-- " and " -->".
specOf() {
	local s=${1#<!-- }
	s=${s%-->}
	printf '%s' "${s% }"
}
# stored is where the newest output of a bench or go test command is kept.
stored() {
	case $1 in
	bench\ *)
		local name=${1#bench }
		printf '%s/%s.md' "$store" "${name%%:*}"
		;;
	go\ test:*) printf '%s/go-%s.md' "$store" "$(printf '%s' "$1" | md5sum | cut -c1-12)" ;;
	esac
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f "$dir"/.bench-*' EXIT
markers=$(grep -E '^<!-- (bench [a-z0-9-]+|summary|go test):.*-->$' "$page" || true)
twice=$(sed -n 's/^<!-- bench \([a-z0-9-]*\):.*/\1/p' <<<"$markers" | sort | uniq -d)
if [ -n "$twice" ]; then
	echo "bench-docs: more than one run named $twice in $page" >&2
	exit 1
fi

# fill puts into each block of the page the newest output of its command.
fill() {
	: >"$tmp/map"
	while IFS= read -r m; do
		spec=$(specOf "$m")
		file=$(stored "$spec")
		case $spec in
		summary:*)
			file=$(mktemp -p "$tmp" summary-XXXX)
			first=1
			for name in ${spec#summary:}; do
				[ -f "$store/$name-summary.md" ] || continue
				if [ -n "$first" ]; then grep -m2 '^|' "$store/$name-summary.md" >"$file" && first=; fi
				grep '^|' "$store/$name-summary.md" | tail -n +3 >>"$file"
			done
			;;
		esac
		[ -s "$file" ] || continue
		if grep -q '^<!-- ' "$file"; then
			echo "bench-docs: $file has a line that would read as a marker" >&2
			return 1
		fi
		printf '%s\t%s\n' "$m" "$file" >>"$tmp/map"
	done <<<"$markers"
	new=$(mktemp -p "$dir" .bench-page-XXXX)
	awk -v map="$tmp/map" '
		BEGIN { while ((getline l < map) > 0) { t = index(l, "\t"); file[substr(l, 1, t - 1)] = substr(l, t + 1) } }
		skip && $0 == "<!-- end -->" { skip = 0 }
		skip && /^<!-- / { bad = 1; exit }
		skip { next }
		{ print }
		$0 in file {
			print ""
			while ((getline l < file[$0]) > 0) print l
			close(file[$0])
			print ""
			skip = 1
		}
		END { if (bad || skip) { print "bench-docs: a block has no <!-- end -->" >"/dev/stderr"; exit 1 } }' "$page" >"$new"
	mv "$new" "$page"
	echo "bench-docs: $(wc -l <"$tmp/map") blocks of $page filled"
}

fill # a page that cannot be filled stops it before any command runs
while IFS= read -r m; do
	spec=$(specOf "$m")
	read -ra args <<<"${spec#*:}"
	case $spec in
	bench\ *)
		name=$(basename "$(stored "$spec")" .md)
		want "$name" || continue
		echo "bench-docs: $name: hack/bench.sh ${args[*]}"
		# The Markdown beside the page, so that its charts' links hold there.
		hack/bench.sh "${args[@]}" -markdown "$dir/.bench-$name.md" </dev/null
		mv "$dir/.bench-$name-summary.md" "$store/$name-summary.md"
		mv "$dir/.bench-$name.md" "$(stored "$spec")"
		;;
	go\ test:*)
		want go || continue
		echo "bench-docs: go test ${args[*]}"
		go test "${args[@]}" </dev/null | tee /dev/stderr | ARGS="${args[*]}" REV=$(git rev-parse --short HEAD) \
			DATE=$(date -u '+%Y-%m-%d %H:%M UTC') awk '
			/^cpu: / { sub(/^cpu: /, ""); cpu = $0 }
			/^pkg: / { pkg = $2 }
			/^Benchmark/ {
				name = $1; sub(/-[0-9]+$/, "", name); figs = ""
				for (i = 3; i < NF; i += 2) figs = figs (figs == "" ? "" : ", ") $i " " $(i + 1)
				rows = rows sprintf("| %s | `%s` | %s | %s |\n", pkg, name, $2, figs)
			}
			END {
				printf "`go test %s` at %s, %s, on %s:\n\n", ENVIRON["ARGS"], ENVIRON["REV"], ENVIRON["DATE"], cpu
				printf "| package | benchmark | iterations | figures |\n|---|---|---|---|\n%s", rows
			}' >"$tmp/go.md"
		mv "$tmp/go.md" "$(stored "$spec")"
		;;
	*) continue ;;
	esac
	fill
done <<<"$markers"

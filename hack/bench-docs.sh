#!/usr/bin/env bash
# Regenerates every table and chart of docs/benchmarks.md. The page holds
# the commands itself, each in a marker before the block it fills, the block
# ending at <!-- end -->:
#   <!-- bench NAME: FLAGS -->  hack/bench.sh FLAGS: the run's tables (and,
#                               with -charts, its charts)
#   <!-- summary: NAME... -->   the summaries of those runs, one table
#   <!-- go test: ARGS -->      go test ARGS: its benchmarks, one row a run
# Usage: hack/bench-docs.sh [-page FILE] [NAME...]: with names (a run's, or
# "go" for every go test), only those are made again; every block is then
# filled from the newest output of its command, kept in .cache/bench/docs
# (BENCH_DOCS_STORE), and a block whose command never ran is left as it is.
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
key() { printf '%s' "$1" | md5sum | cut -c1-12; }
map=$(mktemp)
trap 'rm -f "$map" "$dir"/.bench-*.md' EXIT
markers=$(grep -E '^<!-- (bench [a-z0-9-]+|summary|go test): .* -->$' "$page" || true)

# First the commands, in the page's order.
while IFS= read -r m; do
	spec=${m#<!-- }
	spec=${spec% -->}
	case $spec in
	bench\ *)
		name=${spec#bench }
		name=${name%%:*}
		if want "$name"; then
			echo "bench-docs: $name: hack/bench.sh ${spec#*: }"
			# The Markdown beside the page, so that its charts' links hold there.
			# shellcheck disable=SC2086 # the flags are words
			hack/bench.sh ${spec#*: } -markdown "$dir/.bench-$name.md"
			mv "$dir/.bench-$name.md" "$store/$name.md"
			mv "$dir/.bench-$name-summary.md" "$store/$name-summary.md"
		fi
		;;
	go\ test:*)
		if want go; then
			echo "bench-docs: go test ${spec#*: }"
			# shellcheck disable=SC2086
			go test ${spec#*: } | tee /dev/stderr | awk -v args="${spec#*: }" -v rev="$(git rev-parse --short HEAD)" \
				-v date="$(date -u '+%Y-%m-%d %H:%M UTC')" '
				/^cpu: / { sub(/^cpu: /, ""); cpu = $0 }
				/^pkg: / { pkg = $2 }
				/^Benchmark/ {
					name = $1; sub(/-[0-9]+$/, "", name); figs = ""
					for (i = 3; i < NF; i += 2) figs = figs (figs == "" ? "" : ", ") $i " " $(i + 1)
					rows = rows sprintf("| %s | `%s` | %s | %s |\n", pkg, name, $2, figs)
				}
				END {
					printf "`go test %s` at %s, %s, on %s:\n\n", args, rev, date, cpu
					printf "| package | benchmark | iterations | figures |\n|---|---|---|---|\n%s", rows
				}' >"$store/go-$(key "$spec").md"
		fi
		;;
	esac
done <<<"$markers"

# Then every block from the newest output of its command.
while IFS= read -r m; do
	spec=${m#<!-- }
	spec=${spec% -->}
	file=
	case $spec in
	bench\ *)
		name=${spec#bench }
		file=$store/${name%%:*}.md
		;;
	go\ test:*) file=$store/go-$(key "$spec").md ;;
	summary:*)
		file=$(mktemp -p "$dir" .bench-summary-XXXX.md)
		first=1
		for name in ${spec#summary:}; do
			[ -f "$store/$name-summary.md" ] || continue
			if [ -n "$first" ]; then grep -m2 '^|' "$store/$name-summary.md" >"$file" && first=; fi
			grep '^|' "$store/$name-summary.md" | tail -n +3 >>"$file"
		done
		;;
	esac
	if [ -s "$file" ]; then printf '%s\t%s\n' "$m" "$file" >>"$map"; fi
done <<<"$markers"

awk -v map="$map" '
	BEGIN { while ((getline l < map) > 0) { t = index(l, "\t"); file[substr(l, 1, t - 1)] = substr(l, t + 1) } }
	skip && $0 == "<!-- end -->" { skip = 0 }
	skip { next }
	{ print }
	$0 in file {
		print ""
		while ((getline l < file[$0]) > 0) print l
		print ""
		skip = 1
	}
	END { if (skip) { print "bench-docs: a block has no <!-- end -->" >"/dev/stderr"; exit 1 } }' "$page" >"$page.new"
mv "$page.new" "$page"
echo "bench-docs: $(wc -l <"$map") blocks of $page filled"

#!/usr/bin/env bash
# Runs `make` targets one after another, as `make test` lists them, and ends with a table of each
# one's wall time against the test-time budget (docs/testing.md#time-budget). It stops at the first
# target that fails, and prints the table then too, with that target marked FAILED.
#
#   hack/tiers.sh TARGET...
set -uo pipefail

make_cmd=${MAKE:-make}
names=() secs=() results=()
total_start=$(date +%s)

table() {
	local total=$(( $(date +%s) - total_start ))
	echo
	echo "Test-time budget (docs/testing.md#time-budget): a cold run within 45 min, a warm one within 25."
	printf '| %-18s | %8s | %-6s |\n' tier "wall s" result
	printf '| %-18s | %8s | %-6s |\n' ------------------ -------: ------
	local i
	for i in "${!names[@]}"; do
		printf '| %-18s | %8d | %-6s |\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
	done
	printf '| %-18s | %8d | %-6s |\n' total "$total" "$(( total / 60 )) min"
}

for target in "$@"; do
	start=$(date +%s)
	echo "== make $target ($(date -u +%T))"
	$make_cmd --no-print-directory "$target"
	rc=$?
	names+=("$target")
	secs+=($(( $(date +%s) - start )))
	if [ "$rc" -ne 0 ]; then
		results+=(FAILED)
		table
		exit "$rc"
	fi
	results+=(ok)
	# What a later target would otherwise check again (the Makefile's bin and images).
	case "$target" in
	bin | images) export CONVOY_BUILT="${CONVOY_BUILT:+$CONVOY_BUILT,}$target" ;;
	esac
done
table

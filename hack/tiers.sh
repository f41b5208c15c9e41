#!/usr/bin/env bash
# Runs `make` targets one after another, as `make test` lists them, and ends with a table of each
# one's wall time against the test-time budget (docs/testing.md#time-budget). It stops at the first
# target that fails, and prints the table then too, with that target marked FAILED. Targets joined
# by "+" run at once, each line of their output prefixed with the target's name, and take one row
# (with each one's own time after it).
#
#   hack/tiers.sh TARGET[+TARGET...]...
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

# together T...: runs each make target T at once, prefixing its lines with [T]; the result is the
# first failure's status, and each target's own wall time is printed as it ends.
together() {
	local t pids=() rc=0 i=0
	for t in "$@"; do
		(
			s=$(date +%s)
			$make_cmd --no-print-directory "$t" 2>&1 | sed -u "s/^/[$t] /"
			r=${PIPESTATUS[0]}
			echo "== make $t: $(( $(date +%s) - s )) s, exit $r"
			exit "$r"
		) &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || rc=$?
	done
	return "$rc"
}

for target in "$@"; do
	start=$(date +%s)
	echo "== make $target ($(date -u +%T))"
	if [[ $target == *+* ]]; then
		IFS=+ read -ra parts <<<"$target"
		together "${parts[@]}"
	else
		$make_cmd --no-print-directory "$target"
	fi
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

#!/usr/bin/env bash
# Runs `make` targets one after another, as `make test` lists them, and ends with a table of each
# one's wall time against the test-time budget (docs/testing.md#time-budget). It stops at the first
# target that fails, and prints the table then too, with that target marked FAILED. Targets joined
# by "+" run at once, each line of their output prefixed with the target's name, and take one row
# (with each one's own time after it). A target written bg:TARGET starts there in the background
# and idle:TARGET likewise at the lowest CPU priority, so that it takes only the CPU the other tiers
# leave idle (a build); each one's row comes when it ends, and the run waits for them at the end.
# A later target that needs a background one's output must wait for it itself (the Makefile's
# bin-k8s137 holds a lock while it builds). When a tier fails, idle: targets are stopped and bg:
# targets (tests, which clean up after themselves) run to their end.
#
#   hack/tiers.sh [bg:|idle:]TARGET[+TARGET...]...
set -uo pipefail

make_cmd=${MAKE:-make}
names=() secs=() results=()
bg_pids=() bg_names=() bg_modes=()
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

# background MODE T: runs make T in a session of its own, its lines prefixed with [T]; with MODE
# idle, at nice 19, for the session too where the kernel groups processes by session (autogroup:
# nice alone would rank T only among its own processes). It writes its wall time and status to
# $bg_dir/T.
bg_dir=$(mktemp -d)
trap 'rm -rf "$bg_dir"' EXIT
background() {
	local mode=$1 t=$2 nice=0
	if [ "$mode" = idle ]; then nice=19; fi
	setsid bash -c '
		if [ "$4" != 0 ] && [ -w /proc/self/autogroup ]; then echo "$4" >/proc/self/autogroup 2>/dev/null; fi
		s=$(date +%s)
		nice -n "$4" "$1" --no-print-directory "$2" 2>&1 | sed -u "s/^/[$2] /"
		r=${PIPESTATUS[0]}
		echo "== make $2 (in the background): $(( $(date +%s) - s )) s, exit $r"
		echo "$(( $(date +%s) - s )) $r" >"$3/$2"
		exit "$r"' _ "$make_cmd" "$t" "$bg_dir" "$nice" &
	bg_pids+=($!)
	bg_names+=("$t")
	bg_modes+=("$mode")
}

# finish_background [fail]: waits for the background targets (on fail, stops the idle: ones) and
# adds their rows.
finish_background() {
	local i t w r
	for i in "${!bg_pids[@]}"; do
		if [ "${1:-}" = fail ] && [ "${bg_modes[$i]}" = idle ]; then kill -- "-${bg_pids[$i]}" 2>/dev/null; fi
		wait "${bg_pids[$i]}" 2>/dev/null
		t=${bg_names[$i]}
		read -r w r 2>/dev/null <"$bg_dir/$t" || { w=$(( $(date +%s) - total_start )); r=stopped; }
		names+=("${bg_modes[$i]}:$t")
		secs+=("$w")
		case $r in 0) results+=(ok) ;; stopped) results+=(stopped) ;; *) results+=(FAILED) ;; esac
	done
	bg_pids=()
}

for target in "$@"; do
	if [[ $target == bg:* || $target == idle:* ]]; then
		echo "== make ${target#*:} in the background (${target%%:*}, $(date -u +%T))"
		background "${target%%:*}" "${target#*:}"
		continue
	fi
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
		finish_background fail
		table
		exit "$rc"
	fi
	results+=(ok)
	# What a later target would otherwise check again (the Makefile's bin and images).
	case "$target" in
	bin | images) export CONVOY_BUILT="${CONVOY_BUILT:+$CONVOY_BUILT,}$target" ;;
	esac
done
finish_background
table
for r in "${results[@]}"; do
	if [ "$r" != ok ]; then exit 1; fi
done

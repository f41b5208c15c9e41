#!/usr/bin/env bash
# Copyright The Convoy Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Runs `make TARGET` beside a bursty CPU load that takes the CPUs from the tests in turns:
# STRESS_THREADS busy loops (default 3) for STRESS_BUSY seconds (4), then STRESS_IDLE seconds (1)
# of rest, at nice -15 where allowed. On CI's 2 cores this gives the timing under which races
# that a quiet machine hides (an informer's handler before another's, a port taken between
# reservation and bind) show.
set -euo pipefail

target=${1:?usage: hack/stress.sh MAKE_TARGET}
threads=${STRESS_THREADS:-3}
busy=${STRESS_BUSY:-4}
idle=${STRESS_IDLE:-1}
prio=-15
nice -n "$prio" true 2>/dev/null || prio=0

load() {
	while :; do
		for _ in $(seq "$threads"); do
			timeout "$busy" nice -n "$prio" sh -c 'while :; do :; done' &
		done
		wait
		sleep "$idle"
	done
}

# A process group of its own, so that stopping it stops every busy loop.
set -m
load &
loader=$!
set +m
stop() { kill -- "-$loader" 2>/dev/null || true; }
trap stop EXIT
echo "hack/stress.sh: make $target beside $threads busy loops (${busy}s on, ${idle}s off, nice $prio)" >&2
make "$target"

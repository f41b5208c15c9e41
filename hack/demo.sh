#!/usr/bin/env bash
# make demo / make demo-down: the whole Convoy stack on a local simulated GPU fleet (no Docker), a
# scripted story from deploy/samples/demo, and the cluster left running for kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
STATE=${STATE:-$ROOT/.convoy}
export KUBECONFIG=$STATE/kubeconfig
# kubectl caches discovery per host:port; each new cluster starts with an empty cache (up), so
# it never reads another cluster's APIs from a reused port.
export KUBECACHEDIR=$STATE/kubectl-cache
export PATH=$BIN:$PATH
# How long the simulated trainer takes per epoch.
EPOCH=${DEMO_EPOCH:-2s}
kubectl() { "$BIN/kubectl" "$@"; }

BEGAN=$SECONDS
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
stamp() { printf '[%4ds] ' $((SECONDS - BEGAN)); }
# note prints one timeline line in one write, so it does not interleave with the watcher's.
note() { printf '%s%s\n' "$(stamp)" "$*"; }

# field JOB JSONPATH: one field of team-a's (or the given namespace/name) TrainingJob.
field() {
	local ns=${1%%/*} name=${1##*/}
	kubectl get trainingjob -n "$ns" "$name" -o "jsonpath=$2" 2>/dev/null || true
}

# wait_for DESCRIPTION SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local what=$1 timeout=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@"; do
		if [ $SECONDS -gt $deadline ]; then
			echo "Timed out after ${timeout}s waiting for $what. The cluster keeps running (make demo-down stops it); logs in $STATE/logs."
			exit 1
		fi
		sleep 1
	done
}
state_is() { [ "$(field "$1" '{.status.state}')" = "$2" ]; }
epoch_at_least() { [ "$(field "$1" '{.status.currentEpoch}')" -ge "$2" ] 2>/dev/null; }

# timeline prints every change of a TrainingJob's state, with the condition's message, until killed.
timeline() {
	declare -A last
	while sleep 1; do
		while IFS='|' read -r job st epoch restarts; do
			[ -n "$job" ] || continue
			key="$st/$restarts"
			[ "${last[$job]:-}" = "$key" ] && continue
			last[$job]=$key
			msg=$(field "$job" "{.status.conditions[?(@.type==\"$st\")].message}")
			case $st in
			Running) msg="$(field "$job" '{.status.resources.placement}'), at epoch ${epoch:-0}" ;;
			esac
			printf '%s%-24s %-12s %s\n' "$(stamp)" "$job" "$st" "$msg"
		done < <(kubectl get trainingjobs -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}|{.status.state}|{.status.currentEpoch}|{.status.restartCount}{"\n"}{end}' 2>/dev/null)
	done
}

up() {
	if [ -f "$STATE/localcluster.pid" ] && kill -0 "$(cat "$STATE/localcluster.pid")" 2>/dev/null; then
		echo "A demo cluster is already running (pid $(cat "$STATE/localcluster.pid")); 'make demo-down' stops it."
		exit 1
	fi
	mkdir -p "$STATE"
	rm -rf "$STATE/ready" "$KUBECACHEDIR"
	say "Starting the local cluster and Convoy (state and logs in $STATE)"
	cat <<'MSG'
    fleet: 2 zones × 2 blocks × 2 racks × 4 nodes of 8× H100 (NVSwitch), and a rack of 4 nodes of 4× L40S (PCIe)
    etcd, kube-apiserver, kube-controller-manager, kwok (the fake kubelets), Kueue, convoy-operator,
    convoy-scheduler and convoy-node-agent (mock NVML) as separate processes; Convoy's components run as
    their ServiceAccounts with the RBAC in deploy/; simtrainer plays the training code of the fake pods.
MSG
	# setsid: the cluster outlives this script and is stopped by 'make demo-down'.
	setsid nohup "$BIN/localcluster" up --state-dir "$STATE" --convoy --simtrainer-epoch "$EPOCH" \
		--zones 2 --blocks-per-zone 2 --racks-per-block 2 --nodes-per-rack 4 --gpus-per-node 8 --pcie-nodes 4 \
		>"$STATE/localcluster.out" 2>&1 </dev/null &
	local pid=$!
	local deadline=$((SECONDS + 300))
	until [ -f "$STATE/ready" ]; do
		if ! kill -0 $pid 2>/dev/null; then
			echo "The local cluster failed to start:"; tail -n 30 "$STATE/localcluster.out"; exit 1
		fi
		if [ $SECONDS -gt $deadline ]; then echo "The local cluster did not become ready in 300 s; see $STATE/localcluster.out"; exit 1; fi
		sleep 1
	done
	sed 's/^/    /' "$STATE/localcluster.out"
	wait_for "the node agents' GPUNodes" 60 bash -c '[ "$("$0" get gpunodes --no-headers 2>/dev/null | wc -l)" -ge 36 ]' "$BIN/kubectl"
	kubectl get gpunodes gpu-0-0-0-0 pcie-0

	say "The administrator fits deploy/queue to this fleet: only on-demand H100 nodes exist, so the queues keep only that flavor"
	echo '    team-a: 32 H100 GPUs of its own, and it may borrow what team-b lends (8)'
	for cq in team-a team-b; do
		kubectl patch clusterqueue "$cq" --type json -p '[{"op": "remove", "path": "/spec/resourceGroups/0/flavors/3"},
			{"op": "remove", "path": "/spec/resourceGroups/0/flavors/2"}, {"op": "remove", "path": "/spec/resourceGroups/0/flavors/1"}]' >/dev/null
	done
	kubectl get clusterqueues

	say "The story (a timeline line whenever a job's state changes)"
	timeline &
	local watcher=$!
	trap 'kill $watcher 2>/dev/null || true' EXIT

	note "team-a submits resnet-sweep: low priority, 4 × 8 GPUs, the whole of its quota"
	kubectl apply --server-side -f deploy/samples/demo/resnet-sweep.yaml >/dev/null
	wait_for "resnet-sweep to run" 120 state_is team-a/resnet-sweep Running
	wait_for "resnet-sweep's third epoch" 120 epoch_at_least team-a/resnet-sweep 3

	note "team-a submits bert-eval: 2 × 8 GPUs more than its quota and borrowing allow"
	kubectl apply --server-side -f deploy/samples/demo/bert-eval.yaml >/dev/null
	wait_for "bert-eval to be queued" 60 state_is team-a/bert-eval Queued
	sleep 3

	note "team-a submits llama-urgent: high priority, 4 × 8 GPUs; Kueue preempts resnet-sweep whole"
	kubectl apply --server-side -f deploy/samples/demo/llama-urgent.yaml >/dev/null
	note "a small job without a queue lands on the PCIe rack: mnist-pcie, 2 × 4 L40S"
	kubectl apply --server-side -f deploy/samples/demo/mnist-pcie.yaml >/dev/null
	wait_for "resnet-sweep to be preempted" 120 state_is team-a/resnet-sweep Queued
	note "resnet-sweep was preempted whole at epoch $(field team-a/resnet-sweep '{.status.currentEpoch}'); its last checkpoint: $(field team-a/resnet-sweep '{.status.checkpoint.latest}')"
	wait_for "llama-urgent to run" 120 state_is team-a/llama-urgent Running
	wait_for "mnist-pcie to run" 120 state_is default/mnist-pcie Running

	note "pcie-urgent: high priority, no queue, needs the whole PCIe rack (4 × 4 L40S); the scheduler preempts mnist-pcie whole"
	kubectl apply --server-side -f deploy/samples/demo/pcie-urgent.yaml >/dev/null
	wait_for "pcie-urgent to run" 120 state_is default/pcie-urgent Running
	note "mnist-pcie was preempted whole at epoch $(field default/mnist-pcie '{.status.currentEpoch}') (restarts: $(field default/mnist-pcie '{.status.restartCount}')); it waits for the rack"

	for job in team-a/llama-urgent default/pcie-urgent default/mnist-pcie team-a/resnet-sweep team-a/bert-eval; do
		wait_for "$job to complete" 300 state_is "$job" Completed
	done
	sleep 1.5
	kill $watcher 2>/dev/null || true
	trap - EXIT

	say "How resnet-sweep resumed (simtrainer, the pods' training code)"
	grep -h 'resnet-sweep resumes' "$STATE/logs/simtrainer.log" | sed 's/^/    /' || true

	say "What the scheduler counted (its /metrics, read as Prometheus would: a ServiceAccount bound to convoy-scheduler-metrics-reader)"
	kubectl create serviceaccount demo-prometheus -n convoy-system >/dev/null 2>&1 || true
	kubectl create clusterrolebinding demo-prometheus --clusterrole=convoy-scheduler-metrics-reader \
		--serviceaccount=convoy-system:demo-prometheus >/dev/null 2>&1 || true
	token=$(kubectl create token demo-prometheus -n convoy-system)
	curl -sk --max-time 10 -H "Authorization: Bearer $token" "$(cat "$STATE/scheduler-metrics-url")" |
		grep -E '^convoy_scheduler_(gang_plans_total|gang_plans_dropped_total|gang_preemptions_total|preemption_victims_total|preemption_victim_pods_total|gang_time_to_bound_seconds_(sum|count))(\{[^}]*\})? ' |
		sed 's/^/    /' || echo "    (the scheduler's metrics could not be read)"

	if [ -s "$STATE/prometheus-url" ]; then
		say "Prometheus, scraping every component with deploy/monitoring's alerts and dashboards' queries"
		echo "    $(cat "$STATE/prometheus-url")   (graphs: /graph; alerts: /alerts; e.g. avg by (training_job) (trainingjob_gpu_utilization_percent))"
	fi

	say "Summary"
	kubectl get trainingjobs -A -o custom-columns='NAMESPACE:.metadata.namespace,JOB:.metadata.name,STATE:.status.state,EPOCH:.status.currentEpoch,ACCURACY:.status.metrics.accuracy,RESTARTS:.status.restartCount,PLACEMENT:.status.resources.placement,LAST CHECKPOINT:.status.checkpoint.latest,RAN:.status.duration'
	echo
	kubectl get workloads.kueue.x-k8s.io -A

	cat <<MSG

The demo took $((SECONDS - BEGAN)) s. The cluster keeps running. Use it with:
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get trainingjobs,workloads -A; kubectl get gpunodes; kubectl kueue list clusterqueue
  kubectl apply -f deploy/samples/pytorch-llama.yaml
Logs of every process: $STATE/logs. Stop everything with: make demo-down
MSG
}

down() {
	if [ ! -f "$STATE/localcluster.pid" ] && [ ! -f "$STATE/pids" ]; then
		echo "No demo cluster state in $STATE: nothing to stop."
		return 0
	fi
	"$BIN/localcluster" down --state-dir "$STATE"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

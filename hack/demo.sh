#!/usr/bin/env bash
# make demo / make demo-down: a local simulated GPU cluster (no Docker), left running for kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
STATE=${STATE:-$ROOT/.convoy}
export KUBECONFIG=$STATE/kubeconfig
kubectl() { "$BIN/kubectl" "$@"; }

up() {
	if [ -f "$STATE/localcluster.pid" ] && kill -0 "$(cat "$STATE/localcluster.pid")" 2>/dev/null; then
		echo "A demo cluster is already running (pid $(cat "$STATE/localcluster.pid")); 'make demo-down' stops it."
		exit 1
	fi
	mkdir -p "$STATE"
	rm -f "$STATE/ready"
	echo "==> Starting the local control plane with a simulated GPU fleet (state in $STATE)"
	# setsid: the cluster outlives this script and is stopped by 'make demo-down'.
	setsid nohup "$BIN/localcluster" up --state-dir "$STATE" \
		--zones 1 --blocks-per-zone 1 --racks-per-block 2 --nodes-per-rack 4 --gpus-per-node 8 \
		>"$STATE/localcluster.out" 2>&1 </dev/null &
	local deadline=$((SECONDS + 240))
	until [ -f "$STATE/ready" ]; do
		if ! kill -0 $! 2>/dev/null; then
			echo "The local cluster failed to start:"; tail -n 30 "$STATE/localcluster.out"; exit 1
		fi
		if [ $SECONDS -gt $deadline ]; then echo "The local cluster did not become ready in 240 s"; exit 1; fi
		sleep 1
	done
	echo "==> Installing Convoy's CRDs"
	kubectl apply --server-side -f deploy/crd/bases >/dev/null
	# Right after creation a CRD has no conditions yet, and kubectl wait fails instead of waiting.
	for _ in $(seq 60); do
		kubectl wait --for condition=Established --timeout=30s crd/trainingjobs.convoy.dev crd/gpunodes.convoy.dev >/dev/null 2>&1 && break
		sleep 0.5
	done
	echo "==> Applying the sample TrainingJob (deploy/samples/pytorch-llama.yaml)"
	kubectl create namespace team-a --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl apply --server-side -f deploy/samples/pytorch-llama.yaml
	echo
	kubectl get nodes -L topology.kubernetes.io/zone,convoy.dev/topology-rack
	echo
	kubectl get gpunodes
	echo
	kubectl get trainingjobs -A
	cat <<MSG

The cluster keeps running. Use it with:
  export KUBECONFIG=$KUBECONFIG
  $BIN/kubectl get trainingjobs -A
Stop it with: make demo-down
MSG
}

down() {
	if [ ! -f "$STATE/localcluster.pid" ]; then
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

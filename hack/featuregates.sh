#!/usr/bin/env bash
# Kueue (sigs.k8s.io/kueue/pkg/features) and Kubernetes (k8s.io/kubernetes/pkg/features) both
# register a DynamicResourceAllocation feature gate, with different specs, in the same global gate;
# a binary or test that links both panics in init before any test runs. List the packages and test
# binaries that would, and fail if there are any (make verify).
set -euo pipefail
cd "$(dirname "$0")/.."
both=$(go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
	awk '/ sigs\.k8s\.io\/kueue\/pkg\/features( |$)/ && / k8s\.io\/kubernetes\/pkg\/features( |$)/ {print $1}')
[ -z "$both" ] && exit 0
echo "These link both Kueue's and Kubernetes' feature gates and panic at start; import the helper from"
echo "a staging module (k8s.io/component-helpers, k8s.io/kubectl, ...) instead of k8s.io/kubernetes:"
echo "$both"
exit 1

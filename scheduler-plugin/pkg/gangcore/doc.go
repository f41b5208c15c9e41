/*
Copyright The Convoy Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package gangcore is the state the GangPlacement and GangPreemption plugins share: the GPU
// inventory published in GPUNode objects, the plans of gangs being placed, the GPUs reserved for
// pods on their way to binding, and the translation of the scheduler's snapshot into the
// planner's view of the cluster.
//
// A gang is a scheduler-plugins PodGroup: the pods labelled scheduling.x-k8s.io/pod-group in one
// namespace; or, for pods without that label, a scheduling.k8s.io/v1beta1 PodGroup (Kubernetes
// 1.37) that their spec.schedulingGroup names (workloadapi.go). Any other GPU pod is a gang of one.
//
// # Parts
//
// A State is one per scheduler (Shared; every profile's GangPlacement gets the same one) and
// composes parts of one job each:
//
//   - gangRegistry (gangs.go): who makes up each gang: the pods labelled for each PodGroup, the
//     node of each pod this scheduler bound before the informer shows it, and each PodGroup's
//     minMember and creation time; whether a gang is complete.
//   - gpuInventory (gpunodes.go): the GPUNodes, converted, and which changed since the last view.
//   - nodeCache (nodecache.go): each node's base, what its GPUs look like before any gang's view
//     of them, recomputed only when the node's pods or GPUNode change.
//   - planBook (planbook.go): the plans, the admission check's bookings (admission.go), an index
//     of their slots by node, and the pods' reservations; verdicts (verdict.go): the gangs found
//     not to fit until the cluster changes; avoidList (avoid.go): the planned nodes other filters
//     rejected.
//   - preemptions (preempt.go): the evictions in progress for preemptor gangs, and the gangs
//     preemption cannot help.
//   - waiters (wake.go): the pods whose gang found no room, activated when GPUs free up, and the
//     retries, with backoff, of gangs whose plan was dropped.
//
// The State's own files use them: a pod's gang (gang.go) and what its pods need of a node
// (eligibility.go) become the planner's view of the cluster (view.go), with each node's victims
// numbered for preemption (victims.go); plan.go, preempt.go, held.go and admission.go plan, check,
// preempt and book against that view; gate.go holds pods until their gang is planned.
//
// # The view
//
// Every plan and preemption turns the scheduler's snapshot into a planner.Cluster (view.go), under
// State.mu. The view locks the inventory once, for the whole loop over the nodes, and hands its
// map to the node cache, which drops the bases whose GPUNode changed. The cache keeps the bases in
// the order of the last view's nodes, which the snapshot keeps from one cycle to the next: a node
// whose pods and GPUNode are unchanged costs no lookup by name. Each node of the cluster starts as
// a copy of its base and is adjusted in place for the gang (its own pods' GPUs free again, other
// plans' claims taken off, eligibility, victims); a node without a free GPU stays its base.
//
// New plans share views kept from plan to plan, one per class of gang (tolerations, node affinity,
// requests, priority), for the last four classes (fleet.go): the snapshot updates its NodeInfos in
// place, so a node whose NodeInfo generation, GPUNode and claims are unchanged keeps its entry,
// and a plan remakes only the nodes that changed since its class's last one and those the gang
// sees apart (its own pods' GPUs, its own slots, the nodes it avoids). A class not kept, or a gang
// whose view depends on every node (inter-pod terms, a domain required by its bound pods), remakes
// them all.
//
// # Locks
//
// Each lock guards the fields its comment names:
//
//   - State.mu guards the plan book, verdicts, preemptions, avoid list, node cache and the views
//     kept: a gang is planned, checked and preempted for against one consistent picture of them,
//     so these parts have no lock of their own.
//   - gpuInventory.mu guards the GPUNodes; a view holds it while it reads them.
//   - gangRegistry.mu guards the PodGroups; the pod index and the bound pods are lock-free.
//   - waiters.mu guards the waiting pods and the armed retries.
//   - draGPUs.mu guards the devices of the ResourceSlices and of the claims' allocations; it is
//     taken alone or under State.mu (the node cache reads it). State.claimMu guards the claims
//     PreBind writes (draalloc.go) and is taken alone.
//
// They are taken in that order: State.mu first, then gpuInventory.mu or gangRegistry.mu, never
// both at once; waiters.mu is taken alone. The scheduling queue calls Gate (PreEnqueue) under its
// own lock, which Activate takes too: so Gate takes only gangRegistry.mu and reads the State's
// sync.Maps, and nothing calls Activate while it holds one of these locks.
package gangcore

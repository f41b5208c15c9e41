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
// namespace. A GPU pod without that label is a gang of one.
package gangcore

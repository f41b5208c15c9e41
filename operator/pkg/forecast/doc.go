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

// Package forecast estimates when a queued TrainingJob starts and when a running one completes.
// Completion comes from the job's measured epoch rate (ObserveReport, called on each progress
// report). Start comes from Plan: a simulation of one Kueue ClusterQueue from now on, in which the
// admitted jobs free their quota at their estimated completion and the pending jobs are admitted in
// Kueue's order as quota frees, or at once by preempting admitted jobs where the ClusterQueue's
// withinClusterQueue policy lets them. The operator (queue/forecast.go) and the trace benchmark
// (test/bench/trace -forecast) run the same code.
package forecast

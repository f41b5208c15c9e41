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
// Package util holds the helpers that Convoy's integration tests, e2e tests and benchmarks share,
// as Kueue keeps its own in test/util: polling until a condition holds, waiting for a TrainingJob's
// state, summaries of its conditions for a failure message, kubectl, free ports, metric reading
// and server-side apply of YAML. test/framework starts the control plane; this package works
// against it. Kueue object wrappers come from Kueue's own sigs.k8s.io/kueue/pkg/util/testing.
package util

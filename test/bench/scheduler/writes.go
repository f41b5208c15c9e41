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

package main

import (
	"slices"
	"strings"
)

// contenderWrites is the API server's write requests (POST, PUT, PATCH, DELETE, APPLY) between two
// readings of framework.APIRequests, by verb and resource, and their sum, leaving out the
// benchmark's own writes: the pods, PodGroups and DRA claims and templates it creates (while a
// streaming contender runs).
func contenderWrites(before, after map[string]float64) (map[string]int, int) {
	out := requestsBetween(before, after, "POST", "PUT", "PATCH", "DELETE", "APPLY")
	delete(out, "POST pods")
	delete(out, "POST podgroups")
	delete(out, "POST resourceclaims")
	delete(out, "POST resourceclaimtemplates")
	total := 0
	for _, n := range out {
		total += n
	}
	return out, total
}

// contenderReads is the API server's read requests (GET, LIST, WATCH) between the same two
// readings, by verb and resource: the contender's informers, and every reader of the benchmark's
// own informers and metrics. A watch is counted when it ends.
func contenderReads(before, after map[string]float64) map[string]int {
	return requestsBetween(before, after, "GET", "LIST", "WATCH")
}

// requestsBetween is how many more requests of the given verbs the API server served at after
// than at before, by "VERB resource", leaving out the served-time keys and the unchanged ones.
func requestsBetween(before, after map[string]float64, verbs ...string) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		verb, _, _ := strings.Cut(k, " ")
		if !slices.Contains(verbs, verb) || strings.HasSuffix(k, " seconds") {
			continue
		}
		if d := int(v - before[k]); d > 0 {
			out[k] = d
		}
	}
	return out
}

package main

import "strings"

// contenderWrites is the API server's write requests (POST, PUT, PATCH, DELETE, APPLY) between two
// readings of framework.APIRequests, by verb and resource, and their sum, leaving out the
// benchmark's own writes: the pods and PodGroups it creates (while a streaming contender runs).
func contenderWrites(before, after map[string]float64) (map[string]int, int) {
	out := map[string]int{}
	total := 0
	for k, v := range after {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		if k == "POST pods" || k == "POST podgroups" || strings.HasSuffix(k, " seconds") {
			continue
		}
		if d := int(v - before[k]); d > 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}

// contenderReads is the API server's read requests (GET, LIST, WATCH) between the same two
// readings, by verb and resource: the contender's informers, and every reader of the benchmark's
// own informers and metrics. A watch is counted when it opens.
func contenderReads(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "GET", "LIST", "WATCH":
		default:
			continue
		}
		if strings.HasSuffix(k, " seconds") {
			continue
		}
		if d := int(v - before[k]); d > 0 {
			out[k] = d
		}
	}
	return out
}

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
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/convoy-dev/convoy/test/framework"
)

// Result is one contender's figures.
type Result struct {
	System string
	// Jobs and Pods are what was submitted and expected; PodsSeen what appeared before the timeout.
	Jobs, Pods, PodsSeen int
	// Total runs from the first job submitted to the last pod observed.
	Total time.Duration
	// P50 and P99 are of per-job times: the job's creation to its last pod observed.
	P50, P99 time.Duration
	// CPUSeconds is the operator's CPU time during the batch; PeakRSSMiB its VmHWM.
	CPUSeconds float64
	PeakRSSMiB float64
	// PlaneCPUSeconds is the CPU time during the batch of the control plane's processes, by
	// framework name: the API server, kube-controller-manager (whose endpoints, EndpointSlice and
	// disruption controllers match every pod against the Services and PodDisruptionBudgets of its
	// namespace) and etcd. With the operator's, they share the machine's cores.
	PlaneCPUSeconds map[string]float64
	// HasOperator is false for the plain-client ceiling, which has no operator to measure.
	HasOperator bool
	// LoadAverage is /proc/loadavg's first three figures when the batch started.
	LoadAverage string
	// Writes are the API server's mutating requests during the batch, from every client.
	Writes string
	// EventWrites are the API server's writes of Events (core and events.k8s.io, creations and
	// updates of a series) from the batch's start until they stop, a few seconds after its last pod.
	EventWrites float64
	// JobEvents are the Events on the jobs themselves (the operator's own) the batch left, and
	// JobEventCount the times they say they happened (a series counts each repeat).
	JobEvents, JobEventCount int
}

func (r *Result) podsPerSecond() float64 {
	if r.Total <= 0 {
		return 0
	}
	return float64(r.PodsSeen) / r.Total.Seconds()
}

func (r *Result) line() string {
	return fmt.Sprintf("%s: %d/%d pods in %.1fs (%.0f pods/s), per job p50 %.2fs p99 %.2fs, operator CPU %.1fs, peak RSS %.0f MiB, CPU of the API server %.1fs, controller-manager %.1fs, etcd %.1fs",
		r.System, r.PodsSeen, r.Pods, r.Total.Seconds(), r.podsPerSecond(), r.P50.Seconds(), r.P99.Seconds(),
		r.CPUSeconds, r.PeakRSSMiB, r.PlaneCPUSeconds[framework.APIServer], r.PlaneCPUSeconds[framework.ControllerManager], r.PlaneCPUSeconds[framework.Etcd])
}

func table(results []*Result) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\tpods\tall pods (s)\tper-job p50 (s)\tper-job p99 (s)\tpods/s\toperator CPU (s)\tpeak RSS (MiB)\tapiserver CPU (s)\tcontroller-manager CPU (s)\tetcd CPU (s)\tEvent writes per job\tEvents on the job per job (times)\tload avg at start\t")
	for _, r := range results {
		cpu, rss, p50, p99 := "-", "-", "-", "-"
		if r.HasOperator {
			cpu, rss = fmt.Sprintf("%.1f", r.CPUSeconds), fmt.Sprintf("%.0f", r.PeakRSSMiB)
			p50, p99 = fmt.Sprintf("%.2f", r.P50.Seconds()), fmt.Sprintf("%.2f", r.P99.Seconds())
		}
		jobEvents := "-"
		if r.HasOperator {
			jobEvents = fmt.Sprintf("%.2f (%.2f)", float64(r.JobEvents)/float64(r.Jobs), float64(r.JobEventCount)/float64(r.Jobs))
		}
		fmt.Fprintf(w, "%s\t%d/%d\t%.1f\t%s\t%s\t%.0f\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\t\n", r.System, r.PodsSeen, r.Pods,
			r.Total.Seconds(), p50, p99, r.podsPerSecond(), cpu, rss, r.PlaneCPUSeconds[framework.APIServer], r.PlaneCPUSeconds[framework.ControllerManager], r.PlaneCPUSeconds[framework.Etcd], r.EventWrites/float64(r.Jobs), jobEvents, r.LoadAverage)
	}
	_ = w.Flush()
	return b.String()
}

// percentile returns the p-th percentile (0-100) of ds by the nearest-rank method.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times; 100 on every Linux that Go
// supports.
const clockTicks = 100

// cpuSeconds returns the user and system CPU time of process pid so far.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after it.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	return (utime + stime) / clockTicks, nil
}

func numCPU() int { return runtime.NumCPU() }

// writeCounts returns the API server's count of mutating requests so far, by "VERB resource"
// (apiserver_request_total summed over codes, scopes and components).
func writeCounts(ctx context.Context, c *framework.Cluster) (map[string]float64, error) {
	data, err := c.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		labels, value := line[len("apiserver_request_total{"):end], strings.TrimSpace(line[end+1:])
		var verb, res, sub string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "resource":
				res = v
			case "subresource":
				sub = v
			}
		}
		switch verb {
		case "GET", "LIST", "WATCH", "CONNECT":
			continue
		}
		if sub != "" {
			res += "/" + sub
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		counts[verb+" "+res] += n
	}
	return counts, nil
}

// jobEvents counts the Events in the benchmark's namespace whose object is a job (a TrainingJob or a
// PyTorchJob), and the times they say they happened.
func jobEvents(ctx context.Context, c *framework.Cluster) (events, times int, err error) {
	list, err := c.Clientset.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, e := range list.Items {
		if k := e.InvolvedObject.Kind; k != "TrainingJob" && k != "PyTorchJob" {
			continue
		}
		events++
		switch {
		case e.Series != nil:
			times += int(e.Series.Count)
		case e.Count > 0:
			times += int(e.Count)
		default:
			times++
		}
	}
	return events, times, nil
}

// eventWrites sums the writes of Events in writeCounts' figures.
func eventWrites(counts map[string]float64) float64 {
	n := 0.0
	for k, v := range counts {
		if strings.HasSuffix(k, " events") {
			n += v
		}
	}
	return n
}

// settledWrites reads writeCounts once a second until the Events stop changing (the recorders
// write them in the background, after the pods), for at most 15 seconds.
func settledWrites(ctx context.Context, c *framework.Cluster) (map[string]float64, error) {
	prev, err := writeCounts(ctx, c)
	for range 15 {
		if err != nil {
			return nil, err
		}
		time.Sleep(time.Second)
		var next map[string]float64
		if next, err = writeCounts(ctx, c); err == nil && eventWrites(next) == eventWrites(prev) {
			return next, nil
		}
		prev = next
	}
	return prev, err
}

// writesLine formats the growth of writeCounts between before and after, largest first.
func writesLine(before, after map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var d []kv
	for k, v := range after {
		if n := v - before[k]; n >= 1 {
			d = append(d, kv{k, n})
		}
	}
	slices.SortFunc(d, func(a, b kv) int { return int(b.v - a.v) })
	var parts []string
	for _, e := range d {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}

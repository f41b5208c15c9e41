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
	"crypto/sha256"
	"runtime"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/test/framework"
)

// benchmarkCPU names this process in Result.CPU: the informers that watch the binds and, for the
// binder contenders, the binder itself.
const benchmarkCPU = "benchmark"

// cpuTimes reads the CPU time each process of the cluster, and this one, has used so far.
func cpuTimes(c *framework.Cluster) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range c.Processes() {
		if d, err := p.CPUTime(); err == nil {
			out[p.Name] = d
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out[benchmarkCPU] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return out
}

// cpuSeconds is the CPU seconds each process used between two readings; a process started in
// between (the scheduler) counts from its start.
func cpuSeconds(before, after map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for name, d := range after {
		out[name] = (d - before[name]).Seconds()
	}
	return out
}

// machineSpeed is the milliseconds of CPU time one thread takes to hash 64 MiB, read just before a
// contender starts. It is CPU time, not wall time, so the control plane's work at that moment does
// not count; what moves it is the machine itself (its host's other tenants, its clock): a run whose
// figure is well above its neighbours' ran on a slower machine, and every process's CPU seconds in
// it are inflated alike. Compare contenders in runs with like figures.
func machineSpeed() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	threadCPU := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	began := threadCPU()
	h := sha256.New()
	for range 64 {
		h.Write(buf)
	}
	_ = h.Sum(nil)
	return float64((threadCPU() - began).Microseconds()) / 1000
}

// peakRSSMiB is the peak resident set size (VmHWM) of the cluster's process name so far; 0 when it
// does not run.
func peakRSSMiB(c *framework.Cluster, name string) float64 {
	for _, p := range c.Processes() {
		if p.Name == name {
			mib, _ := p.PeakRSSMiB()
			return mib
		}
	}
	return 0
}

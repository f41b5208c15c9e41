package main

import (
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

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

package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a component the cluster started and owns.
type Process struct {
	// Name identifies the process and names its log file.
	Name string
	// Binary is the executable's absolute path.
	Binary string
	// Pid is the process's id, which is also its process group's id.
	Pid int
	// LogFile receives the process's stdout and stderr.
	LogFile string
}

// proc is a running Process and what its waiter goroutine learned.
type proc struct {
	Process
	args, env []string      // the command line and environment StartProcess was given
	done      chan struct{} // closed once the process has exited and been reaped
	err       error         // the exit status; read only after done is closed
	// ending is set, under Cluster.mu, once StopProcess, KillProcess or RestartIfExited has taken
	// the process to end or replace it: RestartIfExited leaves it alone.
	ending bool
}

// stopGrace is how long Stop lets a process shut down after SIGTERM before it kills the group.
const stopGrace = 10 * time.Second

// StartProcess runs binary with args as a component of the cluster: in its own process group,
// killed when the test process dies (Pdeathsig), with stdout and stderr in
// <StateDir>/logs/<name>.log, stopped by Stop. A binary without a slash is looked up in BinDir,
// then in PATH. env is added to the test process's environment. StartProcess does not wait for
// the process to be ready; see WaitHealthy.
func (c *Cluster) StartProcess(name, binary string, args []string, env []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("cluster is stopped")
	}
	if _, ok := c.procs[name]; ok {
		return fmt.Errorf("a process named %q already runs", name)
	}
	path, err := c.lookBinary(binary)
	if err != nil {
		return err
	}
	logFile := filepath.Join(c.StateDir, "logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy

	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = c.StateDir
	cmd.Stdout = out
	cmd.Stderr = out
	// Setpgid lets Stop kill whatever the process forks. Pdeathsig kills it when the thread that
	// started it dies with the test binary, so a crashed or timed-out test leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(out, "+ %s %s\n", path, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{
		Process: Process{Name: name, Binary: path, Pid: cmd.Process.Pid, LogFile: logFile},
		args:    args,
		env:     env,
		done:    make(chan struct{}),
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs[name] = p
	c.order = append(c.order, p)
	return c.writePidsLocked()
}

// StopProcess stops the process called name as Stop would and forgets it, so that a test can start
// it again under the same name (the log file is appended to).
func (c *Cluster) StopProcess(name string) error {
	p := c.takeToEnd(name)
	if p == nil {
		return fmt.Errorf("no process named %q", name)
	}
	p.stop(stopGrace)
	return c.forget(p)
}

// takeToEnd returns the process called name, marked as being ended (or nil when there is none),
// so that RestartIfExited does not start it again as it goes.
func (c *Cluster) takeToEnd(name string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	if p != nil {
		p.ending = true
	}
	return p
}

// KillProcess ends the process called name as a crash or the OOM killer would: SIGKILL to its
// process group, with no SIGTERM and no grace period, so it cannot release a leader-election Lease
// or finish a request. It waits until the process is reaped and forgets it, like StopProcess;
// RestartProcess starts it again.
func (c *Cluster) KillProcess(name string) error {
	p := c.takeToEnd(name)
	if p == nil {
		return fmt.Errorf("no process named %q", name)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	<-p.done
	return c.forget(p)
}

// RestartProcess starts again, with the same binary, arguments and environment, the process called
// name that StopProcess or KillProcess ended. Like StartProcess it does not wait for it to be ready.
func (c *Cluster) RestartProcess(name string) error {
	c.mu.Lock()
	p := c.ended[name]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no ended process named %q", name)
	}
	return c.StartProcess(name, p.Binary, p.args, p.env)
}

// RestartIfExited starts the process called name again when it has exited on its own (a crash,
// or a leader election lost under CPU starvation), as a kubelet restarts a container, and reports
// whether it did. A process that StopProcess or KillProcess ends, even while it goes, is left
// alone.
func (c *Cluster) RestartIfExited(name string) (bool, error) {
	c.mu.Lock()
	p := c.procs[name]
	exited := p != nil && !c.stopped && !p.ending && p.exited()
	if exited {
		p.ending = true
	}
	c.mu.Unlock()
	if !exited {
		return false, nil
	}
	if err := c.forget(p); err != nil {
		return true, err
	}
	return true, c.RestartProcess(name)
}

// forget drops the ended process p from the running ones and remembers its command line for
// RestartProcess.
func (c *Cluster) forget(p *proc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := p.Name
	if c.ended == nil {
		c.ended = map[string]*proc{}
	}
	c.ended[name] = p
	if c.procs[name] == p {
		delete(c.procs, name)
	}
	// A new slice: Stop may be iterating over the old one.
	c.order = slices.DeleteFunc(slices.Clone(c.order), func(q *proc) bool { return q == p })
	return c.writePidsLocked()
}

// lookBinary returns the absolute, symlink-free path of binary, as /proc/<pid>/exe shows it.
func (c *Cluster) lookBinary(binary string) (string, error) {
	path := binary
	if !strings.Contains(binary, "/") {
		path = filepath.Join(c.BinDir, binary)
		if _, err := os.Stat(path); err != nil {
			if path, err = exec.LookPath(binary); err != nil {
				return "", err
			}
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(path)
}

// PidsFile is the file in the state directory that lists the running processes, one
// "<pid> <name> <binary>" line each, for tools that clean up after a cluster whose owner died.
const PidsFile = "pids"

func (c *Cluster) writePidsLocked() error {
	var b strings.Builder
	for _, p := range c.order {
		select {
		case <-p.done:
			continue
		default:
		}
		fmt.Fprintf(&b, "%d %s %s\n", p.Pid, p.Name, p.Binary)
	}
	return os.WriteFile(filepath.Join(c.StateDir, PidsFile), []byte(b.String()), 0o644)
}

// RunningProcesses returns the processes listed in <stateDir>/pids that still run, for example
// those of a cluster whose owner was killed before it could stop them.
func RunningProcesses(stateDir string) ([]Process, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, PidsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var running []Process
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil || pid <= 1 {
			continue
		}
		p := Process{Pid: pid, Name: fields[1], Binary: fields[2], LogFile: filepath.Join(stateDir, "logs", fields[1]+".log")}
		if p.Running() {
			running = append(running, p)
		}
	}
	return running, nil
}

// Running reports whether the process exists, is not a zombie, and runs its Binary: a pid
// recycled by the system runs something else.
func (p Process) Running() bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid))
	// A binary rebuilt while it runs shows as "<path> (deleted)".
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != p.Binary {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return false
	}
	// The state letter follows the parenthesised command name, which may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// Processes returns the processes the cluster started, in start order.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]Process, 0, len(c.order))
	for _, p := range c.order {
		ps = append(ps, p.Process)
	}
	return ps
}

// CheckProcesses returns an error naming every process of the cluster that has exited, with the
// end of its log, or nil when all of them still run.
func (c *Cluster) CheckProcesses() error {
	c.mu.Lock()
	order := c.order
	c.mu.Unlock()
	var errs []error
	for _, p := range order {
		if err := c.exited(p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) logFile(name string) string {
	return filepath.Join(c.StateDir, "logs", name+".log")
}

// exited returns a non-nil error, with the end of the process's log, when the process has exited.
func (c *Cluster) exited(name string) error {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no process named %q", name)
	}
	if !p.exited() {
		return nil
	}
	return fmt.Errorf("%s exited (%v); end of %s:\n%s", name, p.err, p.LogFile, LogTail(p.LogFile, logTailLines))
}

// exited reports whether the process has exited and been reaped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends p's process group: SIGTERM, then SIGKILL after the grace period, then waits.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Sweep up anything the leader forked that ignored SIGTERM.
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// logTailLines is how much of a component's log start errors quote.
const logTailLines = 20

// logLineBytes clips each quoted line: a structured log's stack traces run to kilobytes, and CI
// shows only part of a failing test's output.
const logLineBytes = 400

// errorLine matches a log line at error level or worse: zap's JSON ("level":"error"), klog's
// header (E1130 21:50:29...), a Go panic or fatal error.
var errorLine = regexp.MustCompile(`"level":"(?:error|dpanic|panic|fatal)"|^[EF]\d{4} \d\d:|^panic: |^fatal error: `)

// LogTail returns what explains a process's end from the file at path: its first and last lines at
// error level, then its last n lines, each clipped (error lines less); or a note saying why it
// cannot. The error lines come first because the cause (a port taken, a request refused) usually
// precedes a long shutdown, and a test's output is cut from the end.
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const maxRead = 1 << 20
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(fi.Size()-maxRead, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	isError := make([]bool, len(lines))
	first, last := -1, -1
	for i, line := range lines {
		if isError[i] = errorLine.MatchString(line); isError[i] {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	// clip shortens line i: a zap line loses its errorCauses, which repeat its error, and its
	// stacktrace, which runs to kilobytes; then an error line keeps 3*logLineBytes, others
	// logLineBytes.
	clip := func(i int) string {
		line, limit := lines[i], logLineBytes
		if isError[i] {
			limit = 3 * logLineBytes
		}
		cut := len(line)
		for _, field := range []string{`,"errorCauses":`, `,"stacktrace":`} {
			if j := strings.Index(line, field); j > 0 {
				cut = min(cut, j)
			}
		}
		cut = min(cut, limit)
		if cut < len(line) {
			return line[:cut] + " [...]"
		}
		return line
	}
	var out []string
	tail := max(len(lines)-n, 0)
	if first >= 0 && first < tail {
		out = append(out, "first error: "+clip(first))
	}
	if last > first && last < tail {
		out = append(out, "last error: "+clip(last))
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("last %d lines:", len(lines)-tail))
	}
	for i := tail; i < len(lines); i++ {
		out = append(out, clip(i))
	}
	return strings.Join(out, "\n")
}

// WaitHealthy polls url until it answers 200 OK, failing early with the end of the log when the
// process called name exits. HTTPS endpoints are polled without verifying their certificate:
// components serve self-signed ones.
func (c *Cluster) WaitHealthy(ctx context.Context, name, url string) error {
	return c.waitHTTP(ctx, name, url, &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a self-signed endpoint
		DisableKeepAlives: true,
	})
}

func (c *Cluster) waitHTTP(ctx context.Context, name, url string, transport http.RoundTripper) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: transport}
	var last string
	err := c.poll(ctx, name, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s at %s (last answer: %s): %w", name, url, last, err)
	}
	return nil
}

// poll calls cond every pollInterval until it returns true or an error, ctx ends, or the process
// called name exits.
func (c *Cluster) poll(ctx context.Context, name string, cond func() (bool, error)) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if err := c.exited(name); err != nil {
			return err
		}
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; end of the %s log:\n%s", ctx.Err(), name, LogTail(c.logFile(name), logTailLines))
		case <-t.C:
		}
	}
}

const pollInterval = 100 * time.Millisecond

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on every Linux kernel built
// for the architectures Go runs on).
const userHZ = 100

// PeakRSSMiB returns the process's peak resident set size so far (VmHWM of /proc/<pid>/status).
func (p Process) PeakRSSMiB() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %q: %w", p.Pid, line, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", p.Pid)
}

// CPUTime returns the CPU time (user and system) the process has used so far, from
// /proc/<pid>/stat; its children are not counted.
func (p Process) CPUTime() (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name, which may hold spaces: state is the first,
	// utime and stime the 12th and 13th.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", p.Pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want 13 or more", p.Pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", p.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

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
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLogTailQuotesTheCauseFirst: a manager refused its configuration in a long error line, then
// shut down at length; the excerpt gives the whole error, without its stack trace, before the
// shutdown's tail, with every line clipped.
func TestLogTailQuotesTheCauseFirst(t *testing.T) {
	var log strings.Builder
	log.WriteString(`{"level":"info","msg":"Starting manager"}` + "\n")
	cause := `featureGates: Invalid value: {` + strings.Repeat(`\"Gate\":true,`, 40) + `}: cannot set feature gate Gate to true, feature is locked to false`
	fmt.Fprintf(&log, `{"level":"error","msg":"conflicting feature gates detected","error":"%s","errorCauses":[{"error":"%s"}],"stacktrace":"%s"}`+"\n",
		cause, cause, strings.Repeat("main.main\\n\\t", 100))
	for i := range 30 {
		fmt.Fprintf(&log, `{"level":"info","msg":"Stopping %d","stacktrace":"%s"}`+"\n", i, strings.Repeat("x", 1000))
	}
	log.WriteString(`{"level":"error","msg":"problem running manager"}` + "\n")
	path := filepath.Join(t.TempDir(), "kueue.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	got := strings.Split(LogTail(path, 5), "\n")
	if want := "first error: "; len(got) == 0 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], "locked to false") ||
		strings.Contains(got[0], "main.main") {
		t.Errorf("first line %q, want the whole error after %q, without the stack trace", got[0], want)
	}
	if n := len(got); n != 1+1+5 {
		t.Errorf("%d lines, want the first error, a heading and the last 5:\n%s", n, strings.Join(got, "\n"))
	}
	if last := got[len(got)-1]; !strings.Contains(last, "problem running manager") {
		t.Errorf("last line %q, want the log's last line", last)
	}
	for _, line := range got {
		if len(line) > len("first error: ")+3*logLineBytes+len(" [...]") {
			t.Errorf("line of %d bytes, want at most %d: %.80s...", len(line), logLineBytes, line)
		}
	}

	// A manager that exits at once: its error is among the last lines, and still whole.
	if got := LogTail(path, 40); !strings.Contains(got, "locked to false") {
		t.Errorf("LogTail of the last 40 lines cuts the error:\n%s", got)
	}

	// A log without errors is quoted as its tail alone.
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := LogTail(path, 2); got != "two\nthree" {
		t.Errorf("LogTail of a log without errors = %q, want its last 2 lines", got)
	}
}

// TestFreePortsAreReservedOutsideTheEphemeralRange: ports come from below the kernel's ephemeral
// range, never twice, and never one another process has reserved or something listens on.
func TestFreePortsAreReservedOutsideTheEphemeralRange(t *testing.T) {
	a, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range append(a, b...) {
		if seen[port] || port < portsFirst || port >= portsEnd {
			t.Errorf("port %d handed out twice or outside %d-%d", port, portsFirst, portsEnd-1)
		}
		seen[port] = true
	}

	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ok, err := reservePort(dir, l.Addr().(*net.TCPAddr).Port); ok || err != nil {
		t.Errorf("reservePort of a port with a listener = %v, %v; want false", ok, err)
	}
	other, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(portsFirst)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if ok, err := reservePort(dir, portsFirst); ok || err != nil {
		t.Errorf("reservePort of a port another process locked = %v, %v; want false", ok, err)
	}
}

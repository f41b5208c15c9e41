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
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Ports for the components a test starts come from a range below the kernel's ephemeral ports
// (net.ipv4.ip_local_port_range, 32768-60999 by default), which connect() and bind to port 0 hand
// out: a port picked there and released before its component binds it could be taken in between
// by any process's outgoing connection or listener. Below that range only FreePorts hands ports
// out, and a lock file per port (flock, released when the process ends) keeps the test processes
// that run at once from handing out the same one.
const (
	portsFirst = 20000
	portsEnd   = 30000
)

var (
	portsMu sync.Mutex
	// portLocks holds the lock files of the ports this process reserved, open until it exits.
	portLocks []*os.File
)

// FreePorts reserves n distinct TCP ports for this process's components: free on every address (a
// port free on loopback alone may be held on a real-node network's gateway, where the API server
// also listens) and reserved by no other process of the machine that uses FreePorts.
func FreePorts(n int) ([]int, error) {
	dir := filepath.Join(os.TempDir(), "convoy-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	ports := make([]int, 0, n)
	start := rand.IntN(portsEnd - portsFirst)
	for i := 0; i < portsEnd-portsFirst && len(ports) < n; i++ {
		port := portsFirst + (start+i)%(portsEnd-portsFirst)
		ok, err := reservePort(dir, port)
		if err != nil {
			return nil, err
		}
		if ok {
			ports = append(ports, port)
		}
	}
	if len(ports) < n {
		return nil, fmt.Errorf("only %d of %d free ports in %d-%d", len(ports), n, portsFirst, portsEnd-1)
	}
	return ports, nil
}

// reservePort locks port's file in dir and checks that nothing listens on the port; it keeps the
// lock for the life of the process when both hold.
func reservePort(dir string, port int) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		f.Close()
		return false, nil
	}
	l.Close()
	portLocks = append(portLocks, f)
	return true, nil
}

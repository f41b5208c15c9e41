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

package stack

import (
	"io"
	"net"
	"time"
)

// relay listens on addr for as long as the process runs and relays each connection to the first
// of backends that accepts it, as a Service in front of several replicas would: a replica that has
// died refuses the connection and the next one gets it.
func relay(addr string, backends []string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go relayConn(conn, backends)
		}
	}()
	return nil
}

func relayConn(conn net.Conn, backends []string) {
	defer conn.Close()
	for _, b := range backends {
		up, err := net.DialTimeout("tcp", b, time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		go func() {
			_, _ = io.Copy(up, conn)
			_ = up.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(conn, up)
		return
	}
}

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
package util

import (
	"net"
	"strconv"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

// FreePort is a free loopback TCP port (framework.FreePorts); it fails the test when there is none.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := framework.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// FreeAddr is a free loopback address, 127.0.0.1:port, for a server to listen on.
func FreeAddr() (string, error) {
	ports, err := framework.FreePorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

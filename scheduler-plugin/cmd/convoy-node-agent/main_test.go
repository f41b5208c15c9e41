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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMockPodResourcesSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "kubelet.sock")
	cases := []struct {
		name    string
		c       config
		want    string
		wantErr string
	}{
		{name: "fake node: the default is not read", c: config{nodeName: "node-a", podResources: socket}},
		{name: "fake fleet: the default is not read", c: config{nodes: "a,b", podResources: socket}},
		{name: "real node", c: config{nodeName: "node-a", podResources: socket, podResourcesSet: true}, want: socket},
		{name: "given empty", c: config{nodeName: "node-a", podResourcesSet: true}},
		{name: "several nodes", c: config{nodes: "a,b", podResources: socket, podResourcesSet: true}, wantErr: "give --node-name"},
		{name: "selected nodes", c: config{nodeName: "a", nodeSelector: "type=kwok", podResources: socket, podResourcesSet: true}, wantErr: "give --node-name"},
		{name: "missing socket", c: config{nodeName: "node-a", podResources: missing, podResourcesSet: true}, wantErr: "start the agent once the kubelet serves it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mockPodResourcesSocket(tc.c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("mockPodResourcesSocket = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("mockPodResourcesSocket = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

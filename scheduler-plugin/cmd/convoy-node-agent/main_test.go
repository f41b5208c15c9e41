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

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

package nvmlmock_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

func TestParseFaultFlag(t *testing.T) {
	cases := map[string]struct {
		node    string
		gpu     int
		fault   nvmlmock.Fault
		wantErr bool
	}{
		"node-a/3=xid:48": {node: "node-a", gpu: 3, fault: nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 48}},
		"node-a/0=xid":    {node: "node-a", gpu: 0, fault: nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79}},
		"n/7=row-remap":   {node: "n", gpu: 7, fault: nvmlmock.Fault{Kind: nvmlmock.FaultRowRemap}},
		"n/1=lost":        {node: "n", gpu: 1, fault: nvmlmock.Fault{Kind: nvmlmock.FaultLost}},
		"n/1=melted":      {wantErr: true},
		"n/x=ecc":         {wantErr: true},
		"n=ecc":           {wantErr: true},
		"n/1=ecc:2":       {wantErr: true},
		"n/1=xid:abc":     {wantErr: true},
	}
	for flag, tc := range cases {
		t.Run(flag, func(t *testing.T) {
			node, gpu, fault, err := nvmlmock.ParseFaultFlag(flag)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff([]any{tc.node, tc.gpu, tc.fault}, []any{node, gpu, fault}); diff != "" {
					t.Errorf("(-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// A fault injected before the node's server exists (the --fault flag) applies when it is created,
// and its event reaches the first event set that registers for it.
func TestFleetFaultBeforeStart(t *testing.T) {
	f, err := nvmlmock.NewFleet(nvmlmock.ProfileA100x8)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Inject("node-a", 2, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79}); err != nil {
		t.Fatal(err)
	}
	if err := f.Inject("node-a", 4, nvmlmock.Fault{Kind: nvmlmock.FaultECC}); err != nil {
		t.Fatal(err)
	}
	if err := f.Inject("node-a", 8, nvmlmock.Fault{Kind: nvmlmock.FaultECC}); err == nil {
		t.Error("GPU 8 of an 8-GPU profile: no error")
	}
	srv := f.Server("node-a", nvmlmock.Options{})
	dev, _ := srv.DeviceGetHandleByIndex(4)
	if n, _ := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); n != 1 {
		t.Errorf("GPU 4 counts %d uncorrectable ECC errors, want 1", n)
	}
	set, _ := srv.EventSetCreate()
	gpu2, _ := srv.DeviceGetHandleByIndex(2)
	if ret := gpu2.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ev, ret := set.Wait(uint32(time.Second.Milliseconds()))
	if ret != nvml.SUCCESS || ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != 79 {
		t.Errorf("event %+v (%v); want the XID 79 injected before the server existed", ev, ret)
	}
	if f.Server("node-a", nvmlmock.Options{}) != srv {
		t.Error("a second Server call made a new server")
	}
}

func TestFleetHTTP(t *testing.T) {
	f, err := nvmlmock.NewFleet(nvmlmock.ProfilePCIe4)
	if err != nil {
		t.Fatal(err)
	}
	srv := f.Server("node-a", nvmlmock.Options{})
	h := httptest.NewServer(f)
	defer h.Close()
	do := func(method, query string) int {
		req, _ := http.NewRequest(method, h.URL+"/faults?"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	dev, _ := srv.DeviceGetHandleByIndex(1)
	if code := do(http.MethodPost, "node=node-a&gpu=1&fault=lost"); code != http.StatusOK {
		t.Fatalf("POST lost: %d", code)
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("after POST lost, GetMemoryInfo returns %v", ret)
	}
	if code := do(http.MethodDelete, "node=node-a&gpu=1"); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("after DELETE, GetMemoryInfo returns %v", ret)
	}
	for query, want := range map[string]int{
		"node=node-a&gpu=1&fault=row-remap": http.StatusBadRequest, // L40S: no row remapping
		"node=node-a&gpu=9":                 http.StatusBadRequest,
		"gpu=1":                             http.StatusBadRequest,
	} {
		if code := do(http.MethodPost, query); code != want {
			t.Errorf("POST %s: %d, want %d", query, code, want)
		}
	}
	if code := do(http.MethodGet, "node=node-a&gpu=1"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want %d", code, http.StatusMethodNotAllowed)
	}
}

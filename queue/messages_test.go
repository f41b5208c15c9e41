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

package queue

import "testing"

func TestPlainPending(t *testing.T) {
	cases := map[string]struct {
		kueue string
		want  string
	}{
		"too few free GPUs": {
			kueue: "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor h100-on-demand, 8 more needed",
			want:  "role worker needs 8 more nvidia.com/gpu than flavor h100-on-demand has free",
		},
		"more than the flavor can ever give": {
			kueue: "couldn't assign flavors to pod set worker: insufficient quota for nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + current podset request (64) > maximum capacity (32)",
			want:  "role worker needs 64 nvidia.com/gpu, more than flavor h100 can ever give it (32, borrowing included)",
		},
		"every flavor tried, and the roles together": {
			kueue: "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed, insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed; " +
				"couldn't assign flavors to pod set ps: insufficient quota for cpu in flavor h100, previously considered podsets requests (60) + current podset request (8) > maximum capacity (64)",
			want: "role worker needs 4 more nvidia.com/gpu than flavor a100 has free, or 8 more nvidia.com/gpu than flavor h100 has free; " +
				"role ps needs 8 cpu (60+8 with the job's other roles), more than flavor h100 can ever give it (64, borrowing included)",
		},
		"taint and node affinity": {
			kueue: "couldn't assign flavors to pod set worker: flavor a100 doesn't match node affinity, untolerated taint spot=true:NoSchedule in flavor h100-spot",
			want:  "role worker needs nodes that flavor a100 does not have (spec.scheduling.nodeSelector or affinity), or a toleration of spot=true:NoSchedule, the taint of flavor h100-spot",
		},
		"a resource without quota": {
			kueue: "couldn't assign flavors to pod set worker: resource example.com/fpga unavailable in ClusterQueue",
			want:  "role worker needs example.com/fpga, for which the ClusterQueue has no quota",
		},
		"a reason this version does not know is kept": {
			kueue: "couldn't assign flavors to pod set worker: something new happened",
			want:  "role worker needs something new happened",
		},
		"missing LocalQueue": {
			kueue: "LocalQueue nope doesn't exist",
			want:  "LocalQueue nope doesn't exist: create it, or name an existing one in spec.scheduling.queue (`kubectl get localqueues`)",
		},
		"inactive ClusterQueue": {
			kueue: "ClusterQueue team-a is inactive",
			want:  "ClusterQueue team-a is inactive: ask your queue administrator (`kubectl describe clusterqueue`)",
		},
		"anything else is Kueue's words": {
			kueue: "The workload is deactivated",
			want:  "The workload is deactivated",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := plainPending(tc.kueue); got != tc.want {
				t.Errorf("plainPending(%q)\n got %q\nwant %q", tc.kueue, got, tc.want)
			}
		})
	}
}

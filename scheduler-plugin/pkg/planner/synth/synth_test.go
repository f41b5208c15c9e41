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

package synth

import "testing"

// TestMixesAgainstTheFleet: the benchmark's mixes ask what their READMEs say of them. The mixed and
// whole-node draws must not change (earlier sessions' figures were taken with them), and fits must
// ask less than the fleet has, with its small workers the most common.
func TestMixesAgainstTheFleet(t *testing.T) {
	const seed = 42
	cases := []struct {
		mix        Mix
		nodes      int
		pods, gpus int // exact for the mixes whose figures are published; 0 to skip
		maxShare   float64
	}{
		{mix: MixedWorkers, nodes: 5000, pods: 14533, gpus: 55136},
		{mix: WholeNodeWorkers, nodes: 5000, pods: 14533, gpus: 116264},
		{mix: FittingWorkers, nodes: 5000, pods: 14533, maxShare: 0.8},
		{mix: FittingWorkers, nodes: 1000, maxShare: 0.85},
	}
	for _, tc := range cases {
		f := DefaultFleet(tc.nodes)
		gangs := Gangs(seed, tc.nodes/5, tc.mix)
		pods, gpus := 0, 0
		perSize := map[int]int{}
		for _, g := range gangs {
			pods += g.Workers
			gpus += g.GPUs()
			perSize[g.GPUsPerWorker]++
		}
		if tc.pods != 0 && pods != tc.pods {
			t.Errorf("%s at %d nodes: %d pods, want %d", tc.mix.Name, tc.nodes, pods, tc.pods)
		}
		if tc.gpus != 0 && gpus != tc.gpus {
			t.Errorf("%s at %d nodes: %d GPUs, want %d", tc.mix.Name, tc.nodes, gpus, tc.gpus)
		}
		capacity := f.Nodes * f.GPUsPerNode
		if tc.maxShare != 0 {
			if share := float64(gpus) / float64(capacity); share > tc.maxShare {
				t.Errorf("%s at %d nodes asks %d of %d GPUs (%.2f), want at most %.2f", tc.mix.Name, tc.nodes, gpus, capacity, share, tc.maxShare)
			}
			for i := 1; i < len(tc.mix.GPUsPerWorker); i++ {
				smaller, larger := tc.mix.GPUsPerWorker[i-1], tc.mix.GPUsPerWorker[i]
				if perSize[smaller] <= perSize[larger] {
					t.Errorf("%s at %d nodes: %d gangs of %d-GPU workers, not more than the %d of %d-GPU workers", tc.mix.Name, tc.nodes, perSize[smaller], smaller, perSize[larger], larger)
				}
			}
		}
	}
}

// TestDrawFollowsWeights: a weight of zero is never drawn, and draws follow the weights.
func TestDrawFollowsWeights(t *testing.T) {
	mix := Mix{Name: "t", MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: []int{1, 2, 4}, Weights: []int{3, 0, 1}}
	got := map[int]int{}
	const n = 40000
	for _, g := range Gangs(7, n, mix) {
		got[g.GPUsPerWorker]++
	}
	if got[2] != 0 {
		t.Errorf("drew the zero-weight count %d times", got[2])
	}
	if share := float64(got[1]) / n; share < 0.73 || share > 0.77 {
		t.Errorf("1-GPU workers are %.3f of the gangs, want 0.75", share)
	}
}

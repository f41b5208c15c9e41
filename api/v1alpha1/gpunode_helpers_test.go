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

package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNVLinkDomains(t *testing.T) {
	gpus := func(indices ...int32) []GPUDevice {
		out := make([]GPUDevice, len(indices))
		for p, i := range indices {
			out[p].Index = i
		}
		return out
	}
	published := func(g []GPUDevice, domain string, positions ...int) []GPUDevice {
		for _, p := range positions {
			g[p].NVLinkDomain = domain
		}
		return g
	}
	link := func(a, b int32, t LinkType) GPULink { return GPULink{A: a, B: b, Type: t, NVLinks: 4} }
	nvlink := func(a, b int32) GPULink { return link(a, b, LinkNVLink) }
	cases := map[string]struct {
		gpus  []GPUDevice
		links []GPULink
		want  []string
	}{
		"no GPUs": {want: []string{}},
		"PCIe only: no domain": {
			gpus:  gpus(0, 1),
			links: []GPULink{link(0, 1, LinkPIX)},
			want:  []string{"", ""},
		},
		"NVSwitch: one domain": {
			gpus:  gpus(0, 1, 2, 3),
			links: []GPULink{nvlink(0, 1), nvlink(0, 2), nvlink(0, 3), nvlink(1, 2), nvlink(1, 3), nvlink(2, 3)},
			want:  []string{"n/nvlink-0", "n/nvlink-0", "n/nvlink-0", "n/nvlink-0"},
		},
		"two pairs joined by SYS: two domains numbered by their lowest GPU": {
			gpus:  gpus(0, 1, 2, 3),
			links: []GPULink{nvlink(2, 3), link(0, 2, LinkSYS), nvlink(0, 1), link(1, 3, LinkSYS)},
			want:  []string{"n/nvlink-0", "n/nvlink-0", "n/nvlink-1", "n/nvlink-1"},
		},
		"a chain of links is one island": {
			gpus:  gpus(0, 1, 2, 3),
			links: []GPULink{nvlink(2, 3), nvlink(0, 1), nvlink(1, 2)},
			want:  []string{"n/nvlink-0", "n/nvlink-0", "n/nvlink-0", "n/nvlink-0"},
		},
		"a GPU without NVLink peers has none": {
			gpus:  gpus(0, 1, 2),
			links: []GPULink{nvlink(1, 2), link(0, 1, LinkSYS)},
			want:  []string{"", "n/nvlink-0", "n/nvlink-0"},
		},
		"GPUs listed out of index order are numbered by index": {
			gpus:  gpus(3, 2, 1, 0),
			links: []GPULink{nvlink(0, 1), nvlink(2, 3)},
			want:  []string{"n/nvlink-1", "n/nvlink-1", "n/nvlink-0", "n/nvlink-0"},
		},
		"a published fabric clique wins over the link matrix": {
			gpus:  published(gpus(0, 1, 2, 3), "c0ffee/1", 0, 1, 2, 3),
			links: []GPULink{nvlink(0, 1), nvlink(2, 3)},
			want:  []string{"c0ffee/1", "c0ffee/1", "c0ffee/1", "c0ffee/1"},
		},
		"islands are counted among GPUs without a published domain": {
			gpus:  published(gpus(0, 1, 2, 3), "c0ffee/1", 0, 1),
			links: []GPULink{nvlink(0, 1), nvlink(2, 3)},
			want:  []string{"c0ffee/1", "c0ffee/1", "n/nvlink-0", "n/nvlink-0"},
		},
		"links to GPUs the node does not list are ignored": {
			gpus:  gpus(0, 1),
			links: []GPULink{nvlink(1, 7), nvlink(-1, 0)},
			want:  []string{"", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NVLinkDomains("n", tc.gpus, tc.links)); diff != "" {
				t.Errorf("NVLinkDomains (-want,+got):\n%s", diff)
			}
		})
	}
}

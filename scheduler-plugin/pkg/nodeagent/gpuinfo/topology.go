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

package gpuinfo

import (
	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// nvlinkGBps is one NVLink's bidirectional bandwidth by generation: NVLink 1 (P100) 40 GB/s,
// NVLink 2 to 4 (V100, A100, H100) 50 GB/s, NVLink 5 (Blackwell) 100 GB/s.
func nvlinkGBps(version uint32) int32 {
	switch version {
	case 0:
		return 0
	case 1:
		return 40
	case 2, 3, 4:
		return 50
	}
	return 100
}

// linkMatrix returns one GPULink per pair a < b: NVLink when the pair shares direct links, or when
// both reach NVSwitches and NVML confirms NVLink peer-to-peer; otherwise the PCIe level, SYS when
// NVML cannot say.
func linkMatrix(gpus []convoy.GPUDevice, ends [][]nvlinkEnd, pcie func(a, b int) (convoy.LinkType, bool), p2p func(a, b int) (bool, bool)) []convoy.GPULink {
	n := len(gpus)
	if n < 2 {
		return nil
	}
	links := make([]convoy.GPULink, 0, n*(n-1)/2)
	for a := range n {
		for b := a + 1; b < n; b++ {
			l := convoy.GPULink{A: int32(a), B: int32(b)}
			direct, bw := directLinks(ends[a], gpus[b].PCIBusID)
			switch {
			case direct > 0:
				l.Type, l.NVLinks, l.BandwidthGBps = convoy.LinkNVLink, direct, bw
			case switchLinked(a, b, ends, p2p):
				na, bwa := switchLinks(ends[a])
				nb, bwb := switchLinks(ends[b])
				l.Type, l.NVLinks, l.BandwidthGBps = convoy.LinkNVLink, min(na, nb), min(bwa, bwb)
			default:
				t, ok := pcie(a, b)
				if !ok {
					t = convoy.LinkSYS
				}
				l.Type = t
			}
			links = append(links, l)
		}
	}
	return links
}

func directLinks(ends []nvlinkEnd, peerBus string) (count, gbps int32) {
	if peerBus == "" {
		return 0, 0
	}
	peer := NormBusID(peerBus)
	for _, e := range ends {
		if e.active && !e.toSwitch && e.peerBus != "" && NormBusID(e.peerBus) == peer {
			count++
			gbps += nvlinkGBps(e.version)
		}
	}
	return count, gbps
}

func switchLinks(ends []nvlinkEnd) (count, gbps int32) {
	for _, e := range ends {
		if e.active && e.toSwitch {
			count++
			gbps += nvlinkGBps(e.version)
		}
	}
	return count, gbps
}

func switchLinked(a, b int, ends [][]nvlinkEnd, p2p func(a, b int) (bool, bool)) bool {
	if na, _ := switchLinks(ends[a]); na == 0 {
		return false
	}
	if nb, _ := switchLinks(ends[b]); nb == 0 {
		return false
	}
	if supported, ok := p2p(a, b); ok {
		return supported
	}
	return true
}

// setNVLinks fills each GPU's NVLinks from what readNVLinks found.
func setNVLinks(gpus []convoy.GPUDevice, ends [][]nvlinkEnd) {
	byBus := map[string]int32{}
	for _, g := range gpus {
		if g.PCIBusID != "" {
			byBus[NormBusID(g.PCIBusID)] = g.Index
		}
	}
	for i := range gpus {
		for _, e := range ends[i] {
			if len(gpus[i].NVLinks) == 32 { // the API's bound; no GPU has more links
				break
			}
			l := convoy.NVLink{Link: int32(e.link), Active: e.active, PeerPCIBusID: e.peerBus}
			if peer, ok := byBus[NormBusID(e.peerBus)]; ok && e.peerBus != "" && !e.toSwitch {
				l.PeerIndex = ptr(peer)
			}
			gpus[i].NVLinks = append(gpus[i].NVLinks, l)
		}
	}
}

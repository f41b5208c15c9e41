package gpuinfo

import (
	"fmt"

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
	peer := normBusID(peerBus)
	for _, e := range ends {
		if e.active && !e.toSwitch && e.peerBus != "" && normBusID(e.peerBus) == peer {
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
			byBus[normBusID(g.PCIBusID)] = g.Index
		}
	}
	for i := range gpus {
		for _, e := range ends[i] {
			if len(gpus[i].NVLinks) == 32 { // the API's bound; no GPU has more links
				break
			}
			l := convoy.NVLink{Link: int32(e.link), Active: e.active, PeerPCIBusID: e.peerBus}
			if peer, ok := byBus[normBusID(e.peerBus)]; ok && e.peerBus != "" && !e.toSwitch {
				l.PeerIndex = ptr(peer)
			}
			gpus[i].NVLinks = append(gpus[i].NVLinks, l)
		}
	}
}

// setDomains names each GPU's NVLink domain: its fabric clique where NVML reports one, else the
// node-local island of GPUs joined by NVLink ("<node>/nvlink-<k>", k counting islands by their
// lowest GPU index). A GPU without NVLink peers has no domain.
func setDomains(gpus []convoy.GPUDevice, links []convoy.GPULink, fabric []string, node string) {
	parent := make([]int, len(gpus))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	linked := make([]bool, len(gpus))
	for _, l := range links {
		if l.Type != convoy.LinkNVLink {
			continue
		}
		linked[l.A], linked[l.B] = true, true
		ra, rb := find(int(l.A)), find(int(l.B))
		if ra != rb {
			parent[max(ra, rb)] = min(ra, rb)
		}
	}
	islands := map[int]int{}
	for i := range gpus {
		switch {
		case fabric[i] != "":
			gpus[i].NVLinkDomain = fabric[i]
		case linked[i]:
			root := find(i)
			k, ok := islands[root]
			if !ok {
				k = len(islands)
				islands[root] = k
			}
			gpus[i].NVLinkDomain = fmt.Sprintf("%s/nvlink-%d", node, k)
		}
	}
}

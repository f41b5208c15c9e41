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

package nodeagent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

// Observation is everything one poll learned about a node's GPUs.
type Observation struct {
	// Static is nil when NVML is unavailable; InitErr then says why.
	Static  *gpuinfo.Static
	InitErr error
	Samples []gpuinfo.Sample
	// XIDs are the critical XID errors seen since the agent started, by GPU index.
	XIDs    map[int]string
	Holders podgpus.Holders
}

// BuildStatus returns the GPUNode status for an observation. conditions carries the
// NVMLAvailable condition across polls, so that its transition time changes only on transitions;
// now is truncated to the second, as the API server stores it.
func BuildStatus(o Observation, conditions *[]metav1.Condition, now time.Time) convoy.GPUNodeStatus {
	now = now.Truncate(time.Second)
	var s convoy.GPUNodeStatus
	cond := metav1.Condition{Type: convoy.GPUNodeNVMLAvailable, LastTransitionTime: metav1.NewTime(now)}
	if o.Static == nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, convoy.GPUNodeReasonInitFailed, "NVML is not initialised yet"
		if ie, ok := o.InitErr.(*gpuinfo.InitError); ok {
			cond.Reason, cond.Message = ie.Reason(), ie.Error()
		} else if o.InitErr != nil {
			cond.Message = o.InitErr.Error()
		}
	} else {
		st := o.Static
		s.DriverVersion, s.CUDAVersion, s.NVMLVersion = st.DriverVersion, st.CUDAVersion, st.NVMLVersion
		s.GPUs = make([]convoy.GPUDevice, len(st.GPUs))
		for i := range st.GPUs {
			// A shallow copy: the NVLinks and NUMA node stay shared with Static, which nobody writes.
			g := st.GPUs[i]
			if i < len(o.Samples) {
				smp := o.Samples[i]
				g.Utilization, g.MemoryUsedMiB, g.MIGMode = smp.Utilization, smp.MemoryUsedMiB, smp.MIGMode
				g.Health, g.HealthReason = smp.Health, smp.Reason
			}
			if reason := o.XIDs[i]; reason != "" {
				g.Health, g.HealthReason = convoy.GPUUnhealthy, reason
			}
			g.AllocatedTo = o.Holders[i]
			s.GPUs[i] = g
		}
		s.Links = st.Links
		cond.Status, cond.Reason = metav1.ConditionTrue, convoy.GPUNodeReasonInitialized
		cond.Message = fmt.Sprintf("NVML %s (driver %s) lists %d GPUs", st.NVMLVersion, st.DriverVersion, len(st.GPUs))
	}
	meta.SetStatusCondition(conditions, cond)
	s.Conditions = append([]metav1.Condition(nil), (*conditions)...)
	s.Summarize()
	return s
}

// SameStatus reports whether two statuses differ only in what is sampled rather than changed:
// utilization, memory in use and the heartbeat time. The agent writes when they differ. It runs for
// every node on every poll, hence the field-by-field comparison rather than reflection.
func SameStatus(a, b *convoy.GPUNodeStatus) bool {
	if a.DriverVersion != b.DriverVersion || a.CUDAVersion != b.CUDAVersion || a.NVMLVersion != b.NVMLVersion ||
		a.Product != b.Product || a.Capacity != b.Capacity || a.Healthy != b.Healthy || a.Free != b.Free ||
		len(a.GPUs) != len(b.GPUs) || !slices.Equal(a.Links, b.Links) ||
		!slices.EqualFunc(a.Conditions, b.Conditions, sameCondition) {
		return false
	}
	for i := range a.GPUs {
		if !sameGPU(&a.GPUs[i], &b.GPUs[i]) {
			return false
		}
	}
	return true
}

func sameGPU(a, b *convoy.GPUDevice) bool {
	return a.Index == b.Index && a.UUID == b.UUID && a.Product == b.Product && a.Architecture == b.Architecture &&
		a.ComputeCapability == b.ComputeCapability && a.MemoryMiB == b.MemoryMiB && a.PCIBusID == b.PCIBusID &&
		equalPtr(a.NUMANode, b.NUMANode) && a.MIGMode == b.MIGMode && a.NVLinkDomain == b.NVLinkDomain &&
		a.Health == b.Health && a.HealthReason == b.HealthReason && a.AllocatedTo == b.AllocatedTo &&
		slices.EqualFunc(a.NVLinks, b.NVLinks, func(x, y convoy.NVLink) bool {
			return x.Link == y.Link && x.Active == y.Active && x.PeerPCIBusID == y.PeerPCIBusID && equalPtr(x.PeerIndex, y.PeerIndex)
		})
}

func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// GFDLabels are the GPU Feature Discovery labels for a status: the product with spaces as dashes,
// the first GPU's memory in MiB, the GPU count, and, where every GPU is in one multi-node NVLink
// clique, the clique as "<cluster UUID>.<clique ID>". None when the node has no GPUs.
func GFDLabels(s *convoy.GPUNodeStatus) map[string]string {
	if len(s.GPUs) == 0 {
		return map[string]string{}
	}
	labels := map[string]string{
		convoy.LabelGPUCount:  strconv.Itoa(len(s.GPUs)),
		convoy.LabelGPUMemory: strconv.FormatInt(s.GPUs[0].MemoryMiB, 10),
	}
	if p := labelValue(s.Product); p != "" {
		labels[convoy.LabelGPUProduct] = p
	}
	if c, ok := fabricClique(s.GPUs[0].NVLinkDomain); ok && !slices.ContainsFunc(s.GPUs, func(g convoy.GPUDevice) bool { return g.NVLinkDomain != s.GPUs[0].NVLinkDomain }) {
		labels[convoy.LabelGPUClique] = c
	}
	return labels
}

// fabricClique is GPU Feature Discovery's clique label value, "<cluster UUID>.<clique ID>", of an
// nvlinkDomain that names a fabric clique ("<cluster UUID>/<clique ID>", not a node's NVLink
// island).
func fabricClique(domain string) (string, bool) {
	uuid, id, ok := strings.Cut(domain, "/")
	if _, err := strconv.ParseUint(id, 10, 32); !ok || err != nil || len(uuid) != 36 || strings.Count(uuid, "-") != 4 {
		return "", false
	}
	return uuid + "." + id, true
}

// labelValue makes a product name a valid label value, as GPU Feature Discovery does: spaces
// become dashes, other characters a label value cannot hold are dropped.
func labelValue(s string) string {
	var b strings.Builder
	for _, r := range strings.ReplaceAll(strings.TrimSpace(s), " ", "-") {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		}
	}
	v := b.String()
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}

// LabelsToApply returns the labels the agent's field manager should own on the node: the desired
// ones that no other field manager owns. apply is false when the node already carries exactly
// those values and the manager owns no other label, so nothing needs writing.
func LabelsToApply(node *corev1.Node, desired map[string]string, manager string) (labels map[string]string, apply bool) {
	ours, others := labelOwners(node, manager)
	labels = map[string]string{}
	for k, v := range desired {
		if !others[k] {
			labels[k] = v
		}
	}
	for k, v := range labels {
		if node.Labels[k] != v || !ours[k] {
			return labels, true
		}
	}
	for k := range ours {
		if _, ok := labels[k]; !ok {
			return labels, true // release a label we no longer set
		}
	}
	return labels, false
}

// labelMemo remembers the last label decision for a version of the node, so that a quiet node's
// managed fields are parsed once rather than on every poll.
type labelMemo struct {
	rv      string
	desired map[string]string
	labels  map[string]string
	apply   bool
}

func (m *labelMemo) decide(node *corev1.Node, desired map[string]string, manager string) (map[string]string, bool) {
	if node.ResourceVersion != "" && node.ResourceVersion == m.rv && maps.Equal(desired, m.desired) {
		return m.labels, m.apply
	}
	labels, apply := LabelsToApply(node, desired, manager)
	*m = labelMemo{rv: node.ResourceVersion, desired: desired, labels: labels, apply: apply}
	return labels, apply
}

// labelOwners returns the labels a field manager owns on the node, and those other managers own.
func labelOwners(node *corev1.Node, manager string) (ours, others map[string]bool) {
	ours, others = map[string]bool{}, map[string]bool{}
	for _, mf := range node.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		owned := others
		if mf.Manager == manager {
			owned = ours
		}
		for k := range fields.Metadata.Labels {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				owned[key] = true
			}
		}
	}
	return ours, others
}

// healthChanges compares GPU health before and after a poll: the GPUs that turned unhealthy and
// those that recovered.
func healthChanges(before map[int32]convoy.GPUHealth, gpus []convoy.GPUDevice) (unhealthy, recovered []convoy.GPUDevice) {
	for _, g := range gpus {
		was, known := before[g.Index]
		switch {
		case g.Health == convoy.GPUUnhealthy && was != convoy.GPUUnhealthy:
			unhealthy = append(unhealthy, g)
		case g.Health == convoy.GPUHealthy && known && was == convoy.GPUUnhealthy:
			recovered = append(recovered, g)
		}
	}
	return unhealthy, recovered
}

func healthOf(s *convoy.GPUNodeStatus) map[int32]convoy.GPUHealth {
	m := make(map[int32]convoy.GPUHealth, len(s.GPUs))
	for _, g := range s.GPUs {
		m[g.Index] = g.Health
	}
	return m
}

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

package gangcore

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// deviceFilter is what a DRA gang's claims ask of each GPU device: the CEL selectors of each GPU
// request's DeviceClass, then the request's own, compiled by upstream's CEL cache. A view leaves a
// node's devices that match no request out of its free GPUs, so that no plan counts on them.
type deviceFilter struct {
	// key names the requests and their selectors: gangs with the same key share the nodes'
	// matches (nodeBase.match) and a kept view.
	key      string
	requests []requestFilter
}

type requestFilter struct {
	name      string
	selectors []cel.CompilationResult
}

// deviceMatch is what a filter finds of a node's devices: those that match a request, and for
// each selector (in the order of the filter's requests) how many devices it rules out first.
type deviceMatch struct {
	set      planner.GPUSet
	ruledOut []int
}

// claimSpec is the spec of a pod's claim, from its ResourceClaim or ResourceClaimTemplate; nil
// while it is unknown.
func (d *draGPUs) claimSpec(ns string, pc corev1.PodResourceClaim) *resourcev1.ResourceClaimSpec {
	if pc.ResourceClaimName != nil {
		if c, err := d.claims.ResourceClaims(ns).Get(*pc.ResourceClaimName); err == nil {
			return &c.Spec
		}
	} else if pc.ResourceClaimTemplateName != nil {
		if t, err := d.templates.ResourceClaimTemplates(ns).Get(*pc.ResourceClaimTemplateName); err == nil {
			return &t.Spec.Spec
		}
	}
	return nil
}

// filterFor is the device filter of a DRA gang's pending pods: nil when their GPU requests select
// nothing, or when the pods' GPU requests differ (each pod's are then left to the allocator).
func (s *State) filterFor(pods []*corev1.Pod) *deviceFilter {
	var out *deviceFilter
	for _, p := range pods {
		key, exprs, names := s.dra.selectorsOf(p)
		switch {
		case key == "":
			return nil
		case out == nil:
			out = &deviceFilter{key: key}
			for i, name := range names {
				r := requestFilter{name: name}
				for _, e := range exprs[i] {
					r.selectors = append(r.selectors, s.celCache.GetOrCompile(e))
				}
				out.requests = append(out.requests, r)
			}
		case key != out.key:
			return nil
		}
	}
	for _, r := range out.requests {
		if len(r.selectors) > 0 {
			return out
		}
	}
	return nil
}

// extendedClass is the DeviceClass that backs the GPU extended resource with DRA GPUs
// (spec.extendedResourceName), as DynamicResources resolves it; nil when none does, when it hands
// out no GPUs (IsGPUClass), or without the DRAExtendedResource feature.
func (s *State) extendedClass() *resourcev1.DeviceClass {
	c := s.extendedGPUs.GetDeviceClass(s.opts.GPUResource)
	if c == nil || !IsGPUClass(c) {
		return nil
	}
	return c
}

// classFilter is the device filter of the pods whose extended resource the DeviceClass c backs:
// its selectors; nil when it has none.
func (s *State) classFilter(c *resourcev1.DeviceClass) *deviceFilter {
	exprs := appendCEL(nil, c.Spec.Selectors)
	if len(exprs) == 0 {
		return nil
	}
	r := requestFilter{name: fmt.Sprintf("%s (DeviceClass %s)", s.opts.GPUResource, c.Name)}
	for _, e := range exprs {
		r.selectors = append(r.selectors, s.celCache.GetOrCompile(e))
	}
	return &deviceFilter{key: fmt.Sprintf("extended:%s:%q", c.Name, exprs), requests: []requestFilter{r}}
}

// selectorsOf lists the pod's GPU requests by name, each with its DeviceClass's selectors and its
// own, and a key naming them all; "" when a claim is not known yet.
func (d *draGPUs) selectorsOf(p *corev1.Pod) (key string, exprs [][]string, names []string) {
	var b strings.Builder
	for _, pc := range p.Spec.ResourceClaims {
		spec := d.claimSpec(p.Namespace, pc)
		if spec == nil {
			return "", nil, nil
		}
		for _, r := range spec.Devices.Requests {
			e := r.Exactly
			if e == nil || !d.gpuClass(e.DeviceClassName) {
				continue
			}
			var sel []string
			if c, err := d.classes.Get(e.DeviceClassName); err == nil {
				sel = appendCEL(sel, c.Spec.Selectors)
			}
			sel = appendCEL(sel, e.Selectors)
			names, exprs = append(names, pc.Name+"/"+r.Name), append(exprs, sel)
			fmt.Fprintf(&b, "%s/%s:%s:%q;", pc.Name, r.Name, e.DeviceClassName, sel)
		}
	}
	return b.String(), exprs, names
}

func appendCEL(out []string, sel []resourcev1.DeviceSelector) []string {
	for _, s := range sel {
		if s.CEL != nil {
			out = append(out, s.CEL.Expression)
		}
	}
	return out
}

// matching returns which of the node's devices match f, from the node's base, computed once per
// base and filter.
func (f *deviceFilter) matching(ctx context.Context, b *nodeBase) *deviceMatch {
	if m := b.match[f.key]; m != nil {
		return m
	}
	m := &deviceMatch{}
	for _, r := range f.requests {
		m.ruledOut = append(m.ruledOut, make([]int, len(r.selectors))...)
	}
	for i, dev := range b.devices {
		if dev.name == "" {
			continue
		}
		in := cel.Device{Driver: convoy.DriverGPU}
		if dev.dev != nil {
			in.AllowMultipleAllocations, in.Attributes, in.Capacity = dev.dev.AllowMultipleAllocations, dev.dev.Attributes, dev.dev.Capacity
		}
		var fails []int
		at := 0
		for _, r := range f.requests {
			failed := -1
			for j, sel := range r.selectors {
				if ok, _, err := sel.DeviceMatches(ctx, in); sel.Error != nil || err != nil || !ok {
					failed = at + j
					break
				}
			}
			at += len(r.selectors)
			if failed < 0 {
				fails = nil
				m.set |= planner.NewGPUSet(i)
				break
			}
			fails = append(fails, failed)
		}
		for _, j := range fails {
			m.ruledOut[j]++
		}
	}
	if b.match == nil {
		b.match = map[string]*deviceMatch{}
	}
	b.match[f.key] = m
	return m
}

// message says how many of the DRA nodes' devices the gang's selectors leave, and which selector
// rules out how many; "" when they leave every device. It reads the bases of the last view.
func (f *deviceFilter) message(ctx context.Context, bases map[string]*nodeBase) string {
	total, matched := 0, 0
	var ruledOut []int
	for _, r := range f.requests {
		ruledOut = append(ruledOut, make([]int, len(r.selectors))...)
	}
	for _, b := range bases {
		if !b.dra {
			continue
		}
		m := f.matching(ctx, b)
		for _, dev := range b.devices {
			if dev.name != "" {
				total++
			}
		}
		matched += m.set.Len()
		for j, n := range m.ruledOut {
			ruledOut[j] += n
		}
	}
	if matched == total {
		return ""
	}
	var parts []string
	at := 0
	for _, r := range f.requests {
		for j, sel := range r.selectors {
			if n := ruledOut[at+j]; n > 0 {
				why := ""
				if sel.Error != nil {
					why = fmt.Sprintf(" (%v)", sel.Error)
				}
				parts = append(parts, fmt.Sprintf("request %s's selector `%s` rules out %d%s", r.name, sel.Expression, n, why))
			}
		}
		at += len(r.selectors)
	}
	return fmt.Sprintf("; the GPU claims' selectors match %d of the %d DRA devices: %s", matched, total, strings.Join(parts, ", "))
}

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

package cost

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// pod is bound to node at bound (seconds after t0) and, when ended >= 0, finished then.
func pod(node string, gpus int64, cpu, mem string, bound, ended int) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "w",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			convoy.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI),
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(bound) * time.Second))}}
	if ended >= 0 {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "w", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			FinishedAt: metav1.NewTime(t0.Add(time.Duration(ended) * time.Second))}}}}
	}
	return p
}

var fleet = map[string]Node{
	"h100-od":   {Product: "NVIDIA-H100", CapacityType: convoy.CapacityTypeOnDemand},
	"h100-spot": {Product: "NVIDIA-H100", CapacityType: convoy.CapacityTypeSpot},
	"a100":      {Product: "NVIDIA-A100", CapacityType: convoy.CapacityTypeOnDemand},
}

var prices = map[string]string{
	"currency": "USD", "gpu.NVIDIA-H100.on-demand": "4", "gpu.NVIDIA-H100.spot": "1.2",
	"cpu": "0.036", "memory.on-demand": "0.0036",
}

func TestUpdate(t *testing.T) {
	cases := map[string]struct {
		prices    map[string]string
		prev      *convoy.CostStatus
		pods      []*corev1.Pod
		until     int
		wantUsage []convoy.ResourceUsage
		// wantAmount is nil when the usage cannot all be priced.
		wantAmount  *float64
		wantMessage string
	}{
		"one pod, on-demand, GPU CPU and memory priced": {
			prices: prices, pods: []*corev1.Pod{pod("h100-od", 8, "4", "16Gi", 0, 900)}, until: 1000,
			wantUsage:  []convoy.ResourceUsage{{Product: "NVIDIA-H100", CapacityType: "on-demand", GPUSeconds: 7200, CPUCoreSeconds: 3600, MemoryGiBSeconds: 14400}},
			wantAmount: ptrTo(8*4*0.25 + 4*0.036*0.25 + 16*0.0036*0.25),
		},
		"spot and on-demand apart; memory unpriced on spot": {
			prices: prices, pods: []*corev1.Pod{pod("h100-od", 1, "1", "1Gi", 0, -1), pod("h100-spot", 2, "1", "1Gi", 1800, -1)}, until: 3600,
			wantUsage: []convoy.ResourceUsage{
				{Product: "NVIDIA-H100", CapacityType: "on-demand", GPUSeconds: 3600, CPUCoreSeconds: 3600, MemoryGiBSeconds: 3600},
				{Product: "NVIDIA-H100", CapacityType: "spot", GPUSeconds: 3600, CPUCoreSeconds: 1800, MemoryGiBSeconds: 1800}},
			wantAmount: ptrTo(4 + 0.036 + 0.0036 + 1.2 + 0.018),
		},
		"a later window adds only its own time, a gone pod's time stays": {
			prices: prices,
			prev: &convoy.CostStatus{AccruedAt: &metav1.Time{Time: t0.Add(600 * time.Second)},
				Usage: []convoy.ResourceUsage{{Product: "NVIDIA-H100", CapacityType: "spot", GPUSeconds: 5000}}},
			pods: []*corev1.Pod{pod("h100-od", 2, "0", "0", 0, -1)}, until: 1800,
			wantUsage: []convoy.ResourceUsage{
				{Product: "NVIDIA-H100", CapacityType: "on-demand", GPUSeconds: 2400},
				{Product: "NVIDIA-H100", CapacityType: "spot", GPUSeconds: 5000}},
			wantAmount: ptrTo(2*4*(1200.0/3600) + 1.2*5000/3600),
		},
		"a product without a price leaves the amount unknown and names the key": {
			prices: prices, pods: []*corev1.Pod{pod("a100", 1, "0", "0", 0, 3600)}, until: 3600,
			wantUsage:   []convoy.ResourceUsage{{Product: "NVIDIA-A100", CapacityType: "on-demand", GPUSeconds: 3600}},
			wantMessage: `no price for gpu.NVIDIA-A100.on-demand in ConfigMap convoy-system/convoy-prices: the administrator adds that key per GPU-hour`,
		},
		"a price without capacity type holds for both": {
			prices: map[string]string{"currency": "EUR", "gpu.NVIDIA-A100": "2"}, pods: []*corev1.Pod{pod("a100", 1, "0", "0", 0, 1800)}, until: 3600,
			wantUsage:  []convoy.ResourceUsage{{Product: "NVIDIA-A100", CapacityType: "on-demand", GPUSeconds: 1800}},
			wantAmount: ptrTo(1.0),
		},
		"an unbound pod and a pod on a deleted node count nothing": {
			prices: prices, pods: []*corev1.Pod{pod("", 8, "1", "1Gi", 0, -1), pod("gone", 8, "1", "1Gi", 0, -1)}, until: 3600,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			list, errs := Parse(tc.prices)
			if len(errs) > 0 {
				t.Fatalf("Parse: %v", errs)
			}
			got := Update(tc.prev, tc.pods, fleet, Prices{List: list, Source: "ConfigMap convoy-system/convoy-prices"}, t0.Add(time.Duration(tc.until)*time.Second))
			if tc.wantUsage == nil {
				if got != nil {
					t.Fatalf("Update = %+v, want nil", got)
				}
				return
			}
			if diff := cmp.Diff(tc.wantUsage, got.Usage); diff != "" {
				t.Errorf("usage (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAmount, got.Amount, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 })); diff != "" {
				t.Errorf("amount (-want,+got):\n%s", diff)
			}
			if got.Message != tc.wantMessage {
				t.Errorf("message = %q, want %q", got.Message, tc.wantMessage)
			}
			if want := t0.Add(time.Duration(tc.until) * time.Second); !got.AccruedAt.Time.Equal(want) {
				t.Errorf("accruedAt = %v, want %v", got.AccruedAt, want)
			}
		})
	}
}

func TestParseNamesBadKeys(t *testing.T) {
	cases := map[string]struct {
		data     map[string]string
		wantKeys []string
		priced   bool
	}{
		"good":                    {data: prices, priced: true},
		"negative price":          {data: map[string]string{"currency": "USD", "gpu.X.spot": "-1"}, wantKeys: []string{"gpu.X.spot"}, priced: true},
		"not a number":            {data: map[string]string{"currency": "USD", "cpu": "cheap"}, wantKeys: []string{"cpu"}, priced: true},
		"unknown key":             {data: map[string]string{"currency": "USD", "gpus.X": "1", "gpu.": "1"}, wantKeys: []string{"gpu.", "gpus.X"}, priced: true},
		"no currency":             {data: map[string]string{"gpu.X": "1"}, wantKeys: []string{"currency"}},
		"currency not ISO 4217":   {data: map[string]string{"currency": "$", "gpu.X": "1"}, wantKeys: []string{"currency"}},
		"a dot in a product name": {data: map[string]string{"currency": "USD", "gpu.X.preemptible": "1"}, priced: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			list, errs := Parse(tc.data)
			var keys []string
			for _, e := range errs {
				keys = append(keys, e.Key)
			}
			if diff := cmp.Diff(tc.wantKeys, keys); diff != "" {
				t.Errorf("keys refused (-want,+got):\n%s\n%v", diff, errs)
			}
			if got := list.Currency != ""; got != tc.priced {
				t.Errorf("priced = %v, want %v", got, tc.priced)
			}
		})
	}
}

func ptrTo(f float64) *float64 { return &f }

func TestSum(t *testing.T) {
	usd := func(hours, amount float64) *convoy.CostStatus {
		return &convoy.CostStatus{GPUHours: hours, Amount: &amount, Currency: "USD"}
	}
	cases := map[string]struct {
		costs []*convoy.CostStatus
		want  *convoy.CostTotal
	}{
		"nothing used":      {costs: []*convoy.CostStatus{nil, nil}},
		"trials add up":     {costs: []*convoy.CostStatus{usd(1, 4), nil, usd(0.5, 2.25)}, want: &convoy.CostTotal{GPUHours: 1.5, Amount: ptrTo(6.25), Currency: "USD", Summary: "6.25 USD"}},
		"an unpriced trial": {costs: []*convoy.CostStatus{usd(1, 4), {GPUHours: 2}}, want: &convoy.CostTotal{GPUHours: 3, Summary: "3.00 GPU-h"}},
		"two currencies":    {costs: []*convoy.CostStatus{usd(1, 4), {GPUHours: 1, Amount: ptrTo(3), Currency: "EUR"}}, want: &convoy.CostTotal{GPUHours: 2, Summary: "2.00 GPU-h"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Sum(tc.costs)); diff != "" {
				t.Errorf("Sum (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSamplePriceListParses: deploy/prices, the sample administrators start from, has no key the
// operator would leave out.
func TestSamplePriceListParses(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/prices/prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(b, cm); err != nil {
		t.Fatal(err)
	}
	list, errs := Parse(cm.Data)
	if len(errs) > 0 || list.Currency == "" || cm.Name != DefaultPriceList {
		t.Errorf("deploy/prices: ConfigMap %s, currency %q, keys left out: %v", cm.Name, list.Currency, errs)
	}
}

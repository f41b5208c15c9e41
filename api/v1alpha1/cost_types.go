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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CostStatus is what a job's pods have cost so far: the resources they held on each kind of node,
// priced by the administrator's price list (docs/operations.md).
type CostStatus struct {
	// gpuHours are the GPU-hours the job's pods held, from each pod's binding to a node until it
	// ended, over every attempt.
	// +optional
	GPUHours float64 `json:"gpuHours,omitempty"`

	// amount is usage priced by the price list, in currency. Absent while some of the usage has no
	// price (message says which).
	// +optional
	Amount *float64 `json:"amount,omitempty"`

	// currency is the price list's currency, for example USD.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Currency string `json:"currency,omitempty"`

	// summary is amount and currency to two decimals, for example "12.34 USD", for kubectl get's
	// COST column; the GPU-hours when there is no amount, for example "3.5 GPU-h".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Summary string `json:"summary,omitempty"`

	// message says why there is no amount: no price list, or no price for some of the usage, and
	// what the administrator adds to the price list.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`

	// usage is what the pods held, by GPU product and capacity type of the nodes they ran on.
	// +optional
	// +listType=map
	// +listMapKey=product
	// +listMapKey=capacityType
	// +kubebuilder:validation:MaxItems=32
	Usage []ResourceUsage `json:"usage,omitempty"`

	// accruedAt is when usage was last brought up to date: the next update adds the time the
	// pods held their resources since.
	// +optional
	AccruedAt *metav1.Time `json:"accruedAt,omitempty"`
}

// ResourceUsage is what a job's pods held on nodes of one GPU product and capacity type.
type ResourceUsage struct {
	// product is the nodes' nvidia.com/gpu.product label, or "unknown" where they have none.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Product string `json:"product"`

	// capacityType is the nodes' capacity type: spot or on-demand.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	CapacityType string `json:"capacityType"`

	// gpuSeconds are the GPUs held times the seconds they were held.
	// +optional
	GPUSeconds int64 `json:"gpuSeconds,omitempty"`

	// cpuCoreSeconds are the CPU cores requested times the seconds they were held.
	// +optional
	CPUCoreSeconds float64 `json:"cpuCoreSeconds,omitempty"`

	// memoryGiBSeconds are the GiB of memory requested times the seconds they were held.
	// +optional
	MemoryGiBSeconds float64 `json:"memoryGiBSeconds,omitempty"`
}

// CostTotal is a sweep's or a trial's cost: GPU-hours, and the amount where every part is priced.
type CostTotal struct {
	// gpuHours are the GPU-hours summed.
	// +optional
	GPUHours float64 `json:"gpuHours,omitempty"`

	// amount is the amounts summed, in currency. Absent while some part has no amount.
	// +optional
	Amount *float64 `json:"amount,omitempty"`

	// currency is the price list's currency.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Currency string `json:"currency,omitempty"`

	// summary is amount and currency to two decimals, or the GPU-hours, as for a TrainingJob.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Summary string `json:"summary,omitempty"`
}

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
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric labels. The per-GPU ones follow the DCGM exporter's (gpu, UUID, modelName, Hostname),
// lower-cased, with the node's name for Hostname.
const (
	labelNode  = "node"
	labelGPU   = "gpu"
	labelUUID  = "uuid"
	labelModel = "model"

	labelNamespace   = "namespace"
	labelTrainingJob = "training_job"
	labelPod         = "pod"
)

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	// Per GPU; named after their DCGM exporter counterparts.
	Utilization *prometheus.GaugeVec   // DCGM_FI_DEV_GPU_UTIL
	MemoryUsed  *prometheus.GaugeVec   // DCGM_FI_DEV_FB_USED, in bytes
	MemoryTotal *prometheus.GaugeVec   // DCGM_FI_DEV_FB_FREE + FB_USED, in bytes
	Healthy     *prometheus.GaugeVec   // 1 healthy, 0 not
	Allocated   *prometheus.GaugeVec   // 1 when a pod holds the GPU
	XIDErrors   *prometheus.CounterVec // DCGM_FI_DEV_XID_ERRORS, as a counter per XID
	NVMLUp      *prometheus.GaugeVec   // per node: 1 when NVML is available
	// Per GPU that a TrainingJob's pod holds, labelled with the job: a job's figure is an
	// aggregation, avg or sum by (namespace, training_job), with no join.
	JobUtilization *prometheus.GaugeVec
	JobMemoryUsed  *prometheus.GaugeVec
	PollDuration   prometheus.Histogram
	Publishes      *prometheus.CounterVec
	PublishTime    *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gpu := []string{labelNode, labelGPU, labelUUID, labelModel}
	jobGPU := []string{labelNamespace, labelTrainingJob, labelPod, labelNode, labelGPU}
	m := &Metrics{
		Utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_gpu_utilization_percent",
			Help: "GPU compute utilization over the last sample period, in percent (DCGM_FI_DEV_GPU_UTIL).",
		}, gpu),
		MemoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_gpu_memory_used_bytes",
			Help: "GPU framebuffer memory in use, in bytes (DCGM_FI_DEV_FB_USED).",
		}, gpu),
		MemoryTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_gpu_memory_total_bytes",
			Help: "GPU framebuffer memory, in bytes.",
		}, gpu),
		Healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_gpu_healthy",
			Help: "1 when the node agent judges the GPU healthy, 0 otherwise.",
		}, gpu),
		Allocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_gpu_allocated",
			Help: "1 when a pod holds the GPU, 0 otherwise.",
		}, gpu),
		XIDErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convoy_gpu_xid_errors_total",
			Help: "XID error events, by XID (DCGM_FI_DEV_XID_ERRORS).",
		}, append(gpu, "xid")),
		JobUtilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trainingjob_gpu_utilization_percent",
			Help: "Compute utilization of a GPU that a TrainingJob's pod holds, in percent: avg by (namespace, training_job) is the job's.",
		}, jobGPU),
		JobMemoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trainingjob_gpu_memory_used_bytes",
			Help: "GPU memory in use on a GPU that a TrainingJob's pod holds, in bytes: sum by (namespace, training_job) is the job's.",
		}, jobGPU),
		NVMLUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convoy_node_agent_nvml_available",
			Help: "1 when NVML initialised and listed the node's GPUs, 0 otherwise.",
		}, []string{labelNode}),
		PollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "convoy_node_agent_poll_duration_seconds",
			Help:    "Time to read one node's GPUs and compute its GPUNode status, without the API writes.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10),
		}),
		Publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convoy_node_agent_publishes_total",
			Help: "API writes by the agent: kind is create (the GPUNode), status or labels; reason is changed or heartbeat; result is success or error.",
		}, []string{"kind", "reason", "result"}),
		PublishTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "convoy_node_agent_publish_duration_seconds",
			Help:    "Latency of the agent's API writes.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"kind"}),
	}
	reg.MustRegister(m.Utilization, m.MemoryUsed, m.MemoryTotal, m.Healthy, m.Allocated, m.XIDErrors,
		m.JobUtilization, m.JobMemoryUsed, m.NVMLUp, m.PollDuration, m.Publishes, m.PublishTime)
	return m
}

// gpuGauges are one GPU's gauges, looked up once rather than on every poll.
type gpuGauges struct {
	labels                                              prometheus.Labels
	utilization, memoryUsed, memoryTotal, healthy, held prometheus.Gauge
}

func (m *Metrics) gpu(node string, index int32, uuid, model string) *gpuGauges {
	values := []string{node, strconv.Itoa(int(index)), uuid, model}
	return &gpuGauges{
		labels:      prometheus.Labels{labelNode: node, labelGPU: values[1], labelUUID: uuid, labelModel: model},
		utilization: m.Utilization.WithLabelValues(values...),
		memoryUsed:  m.MemoryUsed.WithLabelValues(values...),
		memoryTotal: m.MemoryTotal.WithLabelValues(values...),
		healthy:     m.Healthy.WithLabelValues(values...),
		held:        m.Allocated.WithLabelValues(values...),
	}
}

// forget drops every series of a node the agent no longer serves.
func (m *Metrics) forget(node string) {
	l := prometheus.Labels{labelNode: node}
	for _, v := range []*prometheus.GaugeVec{m.Utilization, m.MemoryUsed, m.MemoryTotal, m.Healthy, m.Allocated, m.NVMLUp, m.JobUtilization, m.JobMemoryUsed} {
		v.DeletePartialMatch(l)
	}
	m.XIDErrors.DeletePartialMatch(l)
}

// jobGauges are the per-job series of one GPU while a TrainingJob's pod holds it.
type jobGauges struct {
	values                  []string // namespace, training_job, pod, node, gpu
	utilization, memoryUsed prometheus.Gauge
}

// setJob points GPU index's per-job series at the job whose pod holds it (job empty: none),
// deleting the series of the job that held it before.
func (m *Metrics) setJob(g **jobGauges, node string, index int32, namespace, job, pod string) {
	values := []string{namespace, job, pod, node, strconv.Itoa(int(index))}
	if *g != nil && slices.Equal((*g).values, values) {
		return
	}
	if *g != nil {
		m.JobUtilization.DeleteLabelValues((*g).values...)
		m.JobMemoryUsed.DeleteLabelValues((*g).values...)
		*g = nil
	}
	if job == "" {
		return
	}
	*g = &jobGauges{values: values, utilization: m.JobUtilization.WithLabelValues(values...), memoryUsed: m.JobMemoryUsed.WithLabelValues(values...)}
}

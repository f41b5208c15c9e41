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
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestGPUUseOfATrainingJob: the agent labels the GPUs a TrainingJob's pods hold with the job, so
// avg by (namespace, training_job) of trainingjob_gpu_utilization_percent is the job's
// utilization and sum of trainingjob_gpu_memory_used_bytes its memory, with no join. A pod of no
// job has no such series; a pod that ends takes its series with it.
func TestGPUUseOfATrainingJob(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "jobuse")
	ctx := context.Background()
	createNodes(t, c, 8, node)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	run := startAgent(t, nil, nvmlmock.ProfileNVLinkPairs8, nodeagent.Options{Nodes: []string{node}, PollInterval: 100 * time.Millisecond})
	waitGPUNode(t, c, node, 20*time.Second, "8 healthy GPUs", published(8, 8))

	worker := func(name, indices string) *corev1.Pod {
		p := gpuPod(node, name, node, 2, indices)
		p.Labels = map[string]string{convoy.LabelJobName: "llm"}
		return p
	}
	for _, p := range []*corev1.Pod{worker("llm-worker-0", "0,1"), worker("llm-worker-1", "2,3"), gpuPod(node, "notebook", node, 2, "4,5")} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	srv := run.fleet.Server(node, nvmlmock.Options{})
	for i, util := range []uint32{20, 40, 60, 80, 90, 90} {
		if err := srv.SetLoad(i, util, uint64(i+1)<<30); err != nil {
			t.Fatal(err)
		}
	}
	job := map[string]string{"namespace": node, "training_job": "llm"}
	series := func(name string) (n int, sum float64) {
		families, err := run.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if framework.HasLabels(m, map[string]string{"node": node}) {
					n++
					if framework.HasLabels(m, job) {
						sum += m.GetGauge().GetValue()
					}
				}
			}
		}
		return n, sum
	}
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "the job's GPU series", func() (bool, error) {
		n, sum := series("trainingjob_gpu_utilization_percent")
		return n == 4 && sum == 200, nil
	})
	if n, sum := series("trainingjob_gpu_memory_used_bytes"); n != 4 || sum != float64((1+2+3+4)<<30) {
		t.Errorf("trainingjob_gpu_memory_used_bytes: %d series summing to %v for the job, want 4 summing to %v", n, sum, (1+2+3+4)<<30)
	}
	if got := run.metric(t, "trainingjob_gpu_utilization_percent", map[string]string{"pod": "llm-worker-1", "gpu": "3"}); got != 80 {
		t.Errorf("utilization of GPU 3 of llm-worker-1 = %v, want 80", got)
	}

	if err := c.Client.Delete(ctx, worker("llm-worker-1", ""), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "the ended pod's series gone", func() (bool, error) {
		n, sum := series("trainingjob_gpu_utilization_percent")
		return n == 2 && sum == 60, fmt.Errorf("%d series, sum %v", n, sum)
	})
}

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

package operator

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// priceList is the administrator's ConfigMap the tests price with: per hour, high enough that a
// few seconds of a test's pods cost more than a cent.
var priceList = map[string]string{
	"currency": "EUR",
	"gpu." + nodes[0].GPUProduct + ".on-demand": "3600",
	"gpu.NVIDIA-L4.spot":                        "720",
	"cpu":                                       "36",
	"memory.on-demand":                          "3.6",
}

// usePriceList installs data as the operator's price list until the test ends.
func (e *env) usePriceList(data map[string]string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: cost.DefaultPriceList}, Data: data}
	if err := e.k.Create(e.t.Context(), cm); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := e.k.Delete(context.Background(), cm); client.IgnoreNotFound(err) != nil {
			e.t.Error(err)
		}
	})
}

// spotNode creates a kwok spot node of NVIDIA-L4 GPUs, marked spot as Karpenter marks it, until
// the test ends.
func (e *env) spotNode(name string) {
	e.t.Helper()
	if err := e.c.CreateNodes(e.t.Context(), framework.NodeSpec{Name: name, GPUs: 8, GPUProduct: "NVIDIA-L4",
		Labels: map[string]string{"karpenter.sh/capacity-type": "spot"}}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := e.k.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
			e.t.Error(err)
		}
	})
}

// heldSeconds is how long a pod held its node as the API server shows it: from its PodScheduled
// condition to its container's finish, or to until while it runs.
func heldSeconds(t *testing.T, pod *corev1.Pod, until time.Time) float64 {
	t.Helper()
	var bound time.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			bound = c.LastTransitionTime.Time
		}
	}
	end := until
	if len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].State.Terminated != nil {
		end = pod.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time
	}
	if bound.IsZero() || end.Before(bound) {
		t.Fatalf("pod %s: bound at %v, ended at %v", pod.Name, bound, end)
	}
	return end.Sub(bound).Seconds()
}

func price(t *testing.T, key string) float64 {
	t.Helper()
	p, err := strconv.ParseFloat(priceList[key], 64)
	if err != nil {
		t.Fatalf("price list key %s: %v", key, err)
	}
	return p
}

// TestCostIsThePriceListsArithmetic: a gang of two workers, one bound to an on-demand H100 node
// and one to a spot L4 node, runs a few seconds and completes. status.cost is what each pod held
// (its GPUs, CPU and memory requests, from its binding to its container's finish, as the pods
// show) times that node's prices per hour, the COST column and the metrics say the same, and a
// pod deleted after the job finished leaves the figures as they were.
func TestCostIsThePriceListsArithmetic(t *testing.T) {
	e := newEnv(t)
	e.usePriceList(priceList)
	spot := "spot-" + e.ns
	e.spotNode(spot)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("cost", e.ns).Workers(2).GPUs(2).Resources("4", "8Gi").Obj())
	pods := e.waitPods("cost", 2, 0)
	e.bind(pods["cost-worker-0"], nodes[0].Name)
	e.bind(pods["cost-worker-1"], spot)
	e.waitState("cost", convoy.StateRunning)
	time.Sleep(3 * time.Second) // the gang holds its GPUs a few seconds
	e.finishPod("cost-worker-0", 0)
	time.Sleep(2 * time.Second) // the spot worker runs on alone
	e.finishPod("cost-worker-1", 0)
	e.waitState("cost", convoy.StateCompleted)

	pods = e.pods("cost")
	odSeconds := heldSeconds(t, pods["cost-worker-0"], time.Time{})
	spotSeconds := heldSeconds(t, pods["cost-worker-1"], time.Time{})
	// Each worker: 2 GPUs, 4 cores, 8 GiB. The price list has no memory price for spot nodes.
	want := 2*odSeconds/3600*price(t, "gpu."+nodes[0].GPUProduct+".on-demand") +
		4*odSeconds/3600*price(t, "cpu") + 8*odSeconds/3600*price(t, "memory.on-demand") +
		2*spotSeconds/3600*price(t, "gpu.NVIDIA-L4.spot") + 4*spotSeconds/3600*price(t, "cpu")
	wantGPUHours := 2 * (odSeconds + spotSeconds) / 3600

	var c *convoy.CostStatus
	e.eventually("status.cost with an amount", func() (bool, string) {
		c = e.job("cost").Status.Cost
		return c != nil && c.Amount != nil, fmt.Sprintf("%+v", c)
	})
	if math.Abs(*c.Amount-want) > 1e-6 || c.Currency != "EUR" || math.Abs(c.GPUHours-wantGPUHours) > 1e-6 {
		t.Errorf("status.cost = %v %s for %v GPU-hours, want %v EUR for %v GPU-hours (on-demand worker %vs, spot worker %vs); usage %+v",
			*c.Amount, c.Currency, c.GPUHours, want, wantGPUHours, odSeconds, spotSeconds, c.Usage)
	}
	if wantSummary := fmt.Sprintf("%.2f EUR", want); c.Summary != wantSummary {
		t.Errorf("status.cost.summary (the COST column) = %q, want %q", c.Summary, wantSummary)
	}
	labels := map[string]string{"namespace": e.ns, "training_job": "cost"}
	e.eventually("the cost metrics", func() (bool, string) {
		amount, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_cost_total", labels)
		hours, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_gpu_hours_total", labels)
		return amount == *c.Amount && hours == c.GPUHours, fmt.Sprintf("trainingjob_cost_total %v, trainingjob_gpu_hours_total %v", amount, hours)
	})

	// The finished pods go; what they cost stays in the status.
	for name, pod := range pods {
		if err := e.k.Delete(t.Context(), pod); err != nil {
			t.Fatalf("deleting %s: %v", name, err)
		}
	}
	e.eventually("the pods gone", func() (bool, string) { return len(e.pods("cost")) == 0, fmt.Sprint(len(e.pods("cost"))) })
	// A change of the job has it reconciled again, without its pods.
	job := e.job("cost")
	job.Annotations = map[string]string{"example.com/touched": "true"}
	if err := e.k.Update(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := e.job("cost").Status.Cost; got == nil || got.Amount == nil || *got.Amount != *c.Amount || got.GPUHours != c.GPUHours {
		t.Errorf("status.cost = %+v after the pods were deleted, want %+v", got, c)
	}
}

// TestBudgetStopsTheJob: a running job whose cost reaches spec.budget is asked to checkpoint, and
// once it reports one, stopped: Failed with reason BudgetExceeded, its cost at least the budget.
func TestBudgetStopsTheJob(t *testing.T) {
	e := newEnv(t)
	e.usePriceList(priceList)
	e.startOperator()
	// One worker of 2 on-demand GPUs costs 2 EUR a second: 10 EUR is reached in about 5 seconds.
	e.create(utiltesting.MakeTrainingJob("capped", e.ns).Workers(1).GPUs(2).Budget(10).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](600),
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj())
	pods := e.waitPods("capped", 1, 0)
	e.bind(pods["capped-worker-0"], nodes[1].Name)
	e.waitState("capped", convoy.StateRunning)

	e.eventually("the budget's checkpoint request", func() (bool, string) {
		job := e.job("capped")
		c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCheckpointRequested)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("cost %+v; %s", job.Status.Cost, util.ConditionSummary(job.Status.Conditions))
	})
	if job := e.job("capped"); job.Status.State != convoy.StateRunning {
		t.Errorf("state %s while the gang is asked to checkpoint, want Running", job.Status.State)
	}
	time.Sleep(time.Second) // a checkpoint in a later second than the request answers it
	e.report(e.pods("capped")["capped-worker-0"], "checkpoint", progress.Checkpoint{Path: "s3://ckpt/" + e.ns + "/capped/epoch-4", Epoch: 4})

	job := e.waitState("capped", convoy.StateFailed)
	e.wantCondition(job, convoy.ConditionFailed, convoy.ReasonBudgetExceeded)
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCheckpointRequested); c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want reason CheckpointSaved", c)
	}
	if job.Status.FailureReason != convoy.ReasonBudgetExceeded || job.Status.Reason != convoy.ReasonBudgetExceeded {
		t.Errorf("failureReason %q, reason %q, want BudgetExceeded", job.Status.FailureReason, job.Status.Reason)
	}
	if c := job.Status.Cost; c == nil || c.Amount == nil || *c.Amount < 10 {
		t.Errorf("status.cost = %+v, want an amount of at least the budget 10", c)
	}
	e.eventually("the gang's pods stopped", func() (bool, string) {
		return len(e.pods("capped")) == 0, fmt.Sprint(len(e.pods("capped")))
	})
}

// TestBadPriceListIsReportedOnTheConfigMap: a price that is not a number is refused with an
// Event on the ConfigMap naming the key and the fix, and a job on those nodes has no amount and
// says which key is missing, rather than a wrong amount.
func TestBadPriceListIsReportedOnTheConfigMap(t *testing.T) {
	e := newEnv(t)
	e.usePriceList(map[string]string{"currency": "EUR", "gpu." + nodes[0].GPUProduct: "4,10"})
	e.startOperator()
	e.eventually("an InvalidPriceList event on the ConfigMap", func() (bool, string) {
		list := &corev1.EventList{}
		if err := e.k.List(t.Context(), list, client.InNamespace(operatorNamespace)); err != nil {
			return false, err.Error()
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == cost.DefaultPriceList && ev.Reason == cost.ReasonInvalidPriceList {
				want := fmt.Sprintf(`key "gpu.%s": "4,10" is not a price: use a number of at least 0, for example "2.50"`, nodes[0].GPUProduct)
				return strings.Contains(ev.Message, want), ev.Message
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	e.create(utiltesting.MakeTrainingJob("unpriced", e.ns).Workers(1).GPUs(1).Obj())
	pods := e.waitPods("unpriced", 1, 0)
	e.bind(pods["unpriced-worker-0"], nodes[0].Name)
	e.waitState("unpriced", convoy.StateRunning)
	time.Sleep(time.Second)
	e.finishPod("unpriced-worker-0", 0)
	job := e.waitState("unpriced", convoy.StateCompleted)
	c := job.Status.Cost
	if c == nil || c.Amount != nil || c.GPUHours <= 0 || !strings.Contains(c.Message, "gpu."+nodes[0].GPUProduct+".on-demand") {
		t.Errorf("status.cost = %+v, want GPU-hours, no amount, and a message naming the missing key", c)
	}
}

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
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestDRADriverPublishesOnlyItsOwnNode: deploy/dra-driver's policy lets the driver's pod on a node
// create, update and delete that node's gpu.nvidia.com ResourceSlice, and refuses a slice of another
// node, or of another driver, naming the node.
func TestDRADriverPublishesOnlyItsOwnNode(t *testing.T) {
	c := cluster(t)
	ownX := framework.Unique(t, "dra-x")
	ownY := framework.Unique(t, "dra-y")
	createNodes(t, c, 0, ownX, ownY)
	ctx := context.Background()
	driver := kubernetes.NewForConfigOrDie(podBoundConfig(t, c, "convoy-dra-driver", ownX)).ResourceV1().ResourceSlices()
	slice := func(node, driverName string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-"},
			Spec: resourcev1.ResourceSliceSpec{Driver: driverName, NodeName: ptr.To(node),
				Pool:    resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}}},
		}
	}
	// Admission policies take effect a moment after they are created: wait for the first refusal,
	// writing nothing (dry run).
	var err error
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "the policy to refuse dra-x's driver publishing dra-y's GPUs", func() (bool, error) {
		_, err = driver.Create(ctx, slice(ownY, convoy.DriverGPU), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return isForbidden(err), err
	})
	if !strings.Contains(err.Error(), "the DRA driver on node "+ownX+" may write only ResourceSlices of that node") {
		t.Errorf("another node's slice: got %v, want it refused naming the node", err)
	}
	_, err = driver.Create(ctx, slice(ownX, "gpu.example.com"), metav1.CreateOptions{})
	if !isForbidden(err) || !strings.Contains(err.Error(), "publishes only driver gpu.nvidia.com, not gpu.example.com") {
		t.Errorf("another driver's slice: got %v, want it refused naming the driver", err)
	}

	// Its own node's slice: created, updated and deleted.
	own, err := driver.Create(ctx, slice(ownX, convoy.DriverGPU), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the driver publishing its own node's GPUs: %v", err)
	}
	own.Spec.Devices = append(own.Spec.Devices, resourcev1.Device{Name: "gpu-1"})
	if own, err = driver.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the driver updating its own node's slice: %v", err)
	}
	if err := driver.Delete(ctx, own.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("the driver deleting its own node's slice: %v", err)
	}

	// Another node's slice, as that node's driver published it, it cannot delete.
	theirs, err := c.Clientset.ResourceV1().ResourceSlices().Create(ctx, slice(ownY, convoy.DriverGPU), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.Delete(ctx, theirs.Name, metav1.DeleteOptions{}); !isForbidden(err) {
		t.Errorf("dra-x's driver deleting dra-y's slice: got %v, want Forbidden", err)
	}
}

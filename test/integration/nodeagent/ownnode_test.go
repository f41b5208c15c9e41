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
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

const nodeNameExtra = "authentication.kubernetes.io/node-name"

// nodeBoundConfig returns the identity of a node agent pod running on node: a token for the
// DaemonSet's ServiceAccount bound to a pod that is bound to node, as the kubelet would mount it.
func nodeBoundConfig(t *testing.T, c *framework.Cluster, node string) *rest.Config {
	t.Helper()
	return podBoundConfig(t, c, agentSA, node)
}

// podBoundConfig returns the identity of a pod of ServiceAccount sa (in agentNamespace) running on
// node, as the kubelet would mount its token.
func podBoundConfig(t *testing.T, c *framework.Cluster, sa, node string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: sa + "-" + node},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "agent", Image: "ghcr.io/convoy-dev/convoy-node-agent:v0.1.0"}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tokenConfig(c, tr.Status.Token)
}

func tokenConfig(c *framework.Cluster, token string) *rest.Config {
	return &rest.Config{
		Host:            c.RESTConfig.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData},
		BearerToken:     token,
		QPS:             50,
		Burst:           100,
	}
}

func TestAgentWritesOnlyItsOwnNode(t *testing.T) {
	c := cluster(t)
	ownX := framework.Unique(t, "own-x")
	ownY := framework.Unique(t, "own-y")
	ownZ := framework.Unique(t, "own-z")
	ctx := context.Background()
	createNodes(t, c, 8, ownX, ownY)
	cfg := nodeBoundConfig(t, c, ownX)

	// The API server puts the pod's node in the token's user info: the admission policies read it.
	cs := kubernetes.NewForConfigOrDie(cfg)
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "system:serviceaccount:convoy-system:convoy-node-agent" || !slices.Equal(ui.Extra[nodeNameExtra], []string{ownX}) {
		t.Fatalf("token user %q with %s=%v; want the agent's ServiceAccount on own-x", ui.Username, nodeNameExtra, ui.Extra[nodeNameExtra])
	}

	// own-y's GPUNode, as its own agent would have published it.
	if err := c.Client.Create(ctx, &convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: ownY}}); err != nil {
		t.Fatal(err)
	}
	agentClient, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	statusApply := func(name string, opts ...client.SubResourceApplyOption) error {
		g := &convoy.GPUNode{
			TypeMeta:   metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status:     convoy.GPUNodeStatus{GPUs: []convoy.GPUDevice{{Index: 0, Health: convoy.GPUHealthy}}},
		}
		return agentClient.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(util.Unstructured(t, g)), append(opts, client.FieldOwner(nodeagent.FieldManager), client.ForceOwnership)...)
	}
	// Admission policies take effect a moment after they are created: wait for the first refusal,
	// without writing anything (dry run).
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "the admission policies to refuse own-x's agent writing own-y's GPUNode", func() (bool, error) {
		err := statusApply(ownY, client.DryRunAll)
		return isForbidden(err), err
	})

	// The policies type-check against the objects they match: kubectl shows no warnings.
	for _, name := range []string{"convoy-node-agent-gpunodes", "convoy-node-agent-node-labels", "convoy-node-agent-events", "convoy-node-agent-pod-deletes"} {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "policy "+name+" type-checked", func() (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, p)
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil, err
		})
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) != 0 {
			t.Errorf("policy %s: type-checking warnings %+v", name, w)
		}
	}

	run := startAgent(t, cfg, nvmlmock.ProfileH100x8, nodeagent.Options{NodeName: ownX, PollInterval: 200 * time.Millisecond})
	waitGPUNode(t, c, ownX, 20*time.Second, "published by its own agent", published(8, 8))
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "own-x's GPU labels", func() (bool, error) {
		return getNode(t, c, ownX).Labels[convoy.LabelGPUCount] == "8", nil
	})
	// Its Events about its own node pass too.
	if err := run.fleet.Inject(ownX, 2, nvmlmock.Fault{Kind: nvmlmock.FaultECC}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, ownX, nodeagent.ReasonGPUUnhealthy)

	// Pods the agent must not delete (the deletes are dry runs: a policy that let one through
	// deletes nothing). A TrainingJob owns one of them on each node.
	ns := framework.Unique(t, "own-pods")
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	tj := utiltesting.MakeTrainingJob("llm", ns).Obj()
	if err := c.Client.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	podOf := func(node string, ofJob bool) *corev1.Pod {
		p := gpuPod(ns, fmt.Sprintf("%s-%v", node, ofJob), node, 1, "")
		if ofJob {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tj, convoy.GroupVersion.WithKind("TrainingJob"))}
		}
		return p
	}
	for _, p := range []*corev1.Pod{podOf(ownY, true), podOf(ownX, false), podOf(ownX, true)} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	labels := func(node string, l map[string]string) error {
		return agentClient.Apply(ctx, corev1ac.Node(node).WithLabels(l), client.FieldOwner(nodeagent.FieldManager))
	}
	// On a GB200 tray it also labels its node's multi-node NVLink clique, as GPU Feature Discovery
	// does (a dry run: the node keeps what its agent wrote).
	withClique := map[string]string{convoy.LabelGPUClique: "5e3c4a2b-1f0d-4c6e-9a8b-7d6e5f4a3b2c.1"}
	for _, k := range []string{convoy.LabelGPUProduct, convoy.LabelGPUMemory, convoy.LabelGPUCount} {
		if v, ok := getNode(t, c, ownX).Labels[k]; ok {
			withClique[k] = v
		}
	}
	if err := agentClient.Apply(ctx, corev1ac.Node(ownX).WithLabels(withClique), client.FieldOwner(nodeagent.FieldManager), client.DryRunAll); err != nil {
		t.Errorf("the agent labelling its own node's %s: %v", convoy.LabelGPUClique, err)
	}
	refused := map[string]struct {
		write func() error
		want  string
	}{
		"another node's GPUNode status": {
			write: func() error { return statusApply(ownY) },
			want:  "may write only GPUNode " + ownX + ", not " + ownY,
		},
		"a GPUNode for another name": {
			write: func() error {
				g := &convoy.GPUNode{TypeMeta: metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"}, ObjectMeta: metav1.ObjectMeta{Name: ownZ}}
				return agentClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(util.Unstructured(t, g)), client.FieldOwner(nodeagent.FieldManager))
			},
			want: "may write only GPUNode " + ownX + ", not " + ownZ,
		},
		"another node's GPU labels": {
			write: func() error { return labels(ownY, map[string]string{convoy.LabelGPUCount: "1"}) },
			want:  "may change only node " + ownX + ", not " + ownY,
		},
		"its own node's other labels": {
			write: func() error {
				return labels(ownX, map[string]string{convoy.LabelGPUCount: "8", convoy.LabelGPUMemory: "81559", convoy.LabelTopologyRack: "rack-9"})
			},
			want: "may change only the labels nvidia.com/gpu.product, nvidia.com/gpu.memory, nvidia.com/gpu.count and nvidia.com/gpu.clique",
		},
		"its own node's taints": {
			write: func() error {
				patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": true}})
				return agentClient.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ownX}}, client.RawPatch(types.MergePatchType, patch))
			},
			want: "may change only the node's labels, not its spec",
		},
		"an Event about another node": {
			write: func() error {
				_, err := cs.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, &eventsv1.Event{
					ObjectMeta:          metav1.ObjectMeta{Name: ownY + ".gpu-unhealthy"},
					EventTime:           metav1.NowMicro(),
					Regarding:           corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: ownY},
					Reason:              nodeagent.ReasonGPUUnhealthy,
					Action:              "CheckHealth",
					Type:                corev1.EventTypeWarning,
					Note:                "GPU 0 is unhealthy",
					ReportingController: "convoy.dev/node-agent",
					ReportingInstance:   "convoy.dev/node-agent-" + ownX,
				}, metav1.CreateOptions{})
				return err
			},
			want: "may report Events only about that node",
		},
		"deleting a TrainingJob's pod on another node": {
			write: func() error { return agentClient.Delete(ctx, podOf(ownY, true), client.DryRunAll) },
			want:  "may delete only pods bound to that node",
		},
		"deleting a pod of its node that no TrainingJob controls": {
			write: func() error { return agentClient.Delete(ctx, podOf(ownX, false), client.DryRunAll) },
			want:  "may delete only pods of a TrainingJob",
		},
		"evicting a TrainingJob's pod on its own node (RBAC)": {
			write: func() error {
				return agentClient.SubResource("eviction").Create(ctx, podOf(ownX, true), &policyv1.Eviction{}, client.DryRunAll)
			},
			want: `cannot create resource "pods/eviction"`,
		},
		"deleting its own GPUNode (RBAC)": {
			write: func() error {
				return agentClient.Delete(ctx, &convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: ownX}})
			},
			want: `cannot delete resource "gpunodes"`,
		},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := tc.write()
			if !isForbidden(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want Forbidden saying %q", err, tc.want)
			}
		})
	}
	if n := getNode(t, c, ownY); n.Labels[convoy.LabelGPUCount] != "" || n.Labels[convoy.LabelTopologyRack] != "" {
		t.Errorf("own-y's labels changed: %v", n.Labels)
	}

	// The same ServiceAccount with a token bound to no pod names no node: it may write nothing.
	unbound, err := c.ServiceAccountConfig(ctx, agentNamespace, agentSA)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := client.New(unbound, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	g := &convoy.GPUNode{
		TypeMeta:   metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"},
		ObjectMeta: metav1.ObjectMeta{Name: ownX},
		Status:     convoy.GPUNodeStatus{GPUs: []convoy.GPUDevice{{Index: 0, Health: convoy.GPUHealthy}}},
	}
	err = uc.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(util.Unstructured(t, g)), client.FieldOwner(nodeagent.FieldManager), client.ForceOwnership)
	if !isForbidden(err) || !strings.Contains(err.Error(), "token names no node") {
		t.Errorf("unbound token writing own-x's GPUNode: %v; want Forbidden, the token names no node", err)
	}
}

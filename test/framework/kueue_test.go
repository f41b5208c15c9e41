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

package framework_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/convoy-dev/convoy/test/framework"
)

// TestKueueRunsFromItsReleaseManifests starts the real Kueue manager in a cluster of its own and
// checks what a user of Kueue sees: a queued batch Job is suspended by Kueue's webhook, admitted
// through a ClusterQueue written in v1beta2 (stored as v1beta1 through the conversion webhook) and
// then runs; only the webhooks of enabled integrations are registered; metrics are served.
func TestKueueRunsFromItsReleaseManifests(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := framework.Start(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.KeepStateDir()
			t.Logf("state and logs kept in %s", c.StateDir)
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	k, err := c.StartKueue(ctx, framework.KueueOptions{ConfigFile: "testdata/kueue/config.yaml"})
	if err != nil {
		t.Fatal(err)
	}

	hooks := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.Client.List(ctx, hooks); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, cfg := range hooks.Items {
		for _, h := range cfg.Webhooks {
			if h.ClientConfig.URL == nil || !strings.HasPrefix(*h.ClientConfig.URL, k.WebhookURL) {
				t.Errorf("webhook %s is not served at %s: %+v", h.Name, k.WebhookURL, h.ClientConfig)
				continue
			}
			paths = append(paths, strings.TrimPrefix(*h.ClientConfig.URL, k.WebhookURL))
		}
	}
	for _, want := range []string{"/mutate-batch-v1-job", "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", "/mutate-kueue-x-k8s-io-v1beta2-workload"} {
		if !contains(paths, want) {
			t.Errorf("mutating webhooks %v lack %s", paths, want)
		}
	}
	for _, unwanted := range []string{"/mutate--v1-pod", "/mutate-apps-v1-deployment", "/mutate-ray-io-v1-rayjob"} {
		if contains(paths, unwanted) {
			t.Errorf("mutating webhooks %v register %s, an integration the configuration does not enable", paths, unwanted)
		}
	}

	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kubectl("apply", "--server-side", "-f", "testdata/kueue/queue.yaml")

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "default", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "user-queue"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			}},
		},
	}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(job.Spec.Suspend, false) {
		t.Error("Kueue's webhook did not suspend the queued Job at creation")
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		last = kubectl("get", "workloads", "-n", "default", "-o", "custom-columns=NAME:.metadata.name,ADMITTED:.status.conditions[?(@.type=='Admitted')].status,CQ:.status.admission.clusterQueue")
		return !ptr.Deref(job.Spec.Suspend, true) && strings.Contains(last, "True") && strings.Contains(last, "cluster-queue"), nil
	})
	if err != nil {
		t.Fatalf("waiting for Kueue to admit the Job: %v; workloads:\n%s", err, last)
	}

	// The ClusterQueue was written as v1beta2 and is stored as v1beta1: reading it in both versions
	// goes through Kueue's conversion webhook.
	for _, version := range []string{"v1beta1", "v1beta2"} {
		cq := &unstructured.Unstructured{}
		cq.SetAPIVersion("kueue.x-k8s.io/" + version)
		cq.SetKind("ClusterQueue")
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "cluster-queue"}, cq); err != nil {
			t.Errorf("reading the ClusterQueue as %s: %v", version, err)
		}
	}

	if body := readMetrics(t, c, k.MetricsURL); !strings.Contains(body, "kueue_admitted_workloads_total") {
		t.Errorf("Kueue's metrics lack kueue_admitted_workloads_total:\n%.2000s", body)
	}
}

// readMetrics reads Kueue's metrics as a ServiceAccount bound to kueue-metrics-reader, the way
// Prometheus does in a cluster.
func readMetrics(t *testing.T, c *framework.Cluster, url string) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: "default"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-kueue-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kueue-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// Kueue serves its metrics with a self-signed certificate of its own making.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed by design
	}}
	var body string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := hc.Do(req)
		if err != nil {
			body = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body = fmt.Sprintf("%s\n%s", resp.Status, data)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v; last answer: %.500s", url, err, body)
	}
	return body
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

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

package queue

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestRestrictedNamespaceAdmitsDefaultJobsAndExplainsMPI: in a namespace whose Pod Security
// admission enforces restricted, a minimal job (the framework's default image, which runs as root)
// is created without a warning and its pods are admitted; an MPI job, whose sshd needs baseline, is
// created with a warning naming spec.framework and the level it needs, and its status says the API
// server refused its pods and which level they meet. A spec that asks restricted of MPI, or root of
// restricted, is refused at apply naming the field.
func TestRestrictedNamespaceAdmitsDefaultJobsAndExplainsMPI(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ns := &corev1.Namespace{}
	if err := e.k.Get(ctx, client.ObjectKey{Name: e.ns}, ns); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := e.k.Patch(ctx, ns, patch); err != nil {
		t.Fatal(err)
	}
	job := func(name, extra string) string {
		return manifest(t, `apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: `+name+`, namespace: `+e.ns+`}
spec:
  model: llama-3-8b
  dataset: s3://corpus/en
  numWorkers: 2
`+extra)
	}

	out := e.kubectl("apply", "-f", job("minimal", ""))
	if !strings.Contains(out, "trainingjob.convoy.dev/minimal created") || strings.Contains(out, "Warning:") {
		t.Errorf("kubectl apply of a minimal job in a restricted namespace:\n%s\nwant it created without a warning", out)
	}
	e.eventually("the minimal job's 2 pods admitted", func() (bool, string) {
		n := len(e.pods(e.ns, "minimal"))
		return n == 2, strings.Repeat("pod ", n)
	})
	if got := e.job(e.ns, "minimal").Status.PodSecurity; got != convoy.PodSecurityRestricted {
		t.Errorf("minimal job: status.podSecurity = %q, want restricted", got)
	}

	out = e.kubectl("apply", "-f", job("mpi", "  framework: mpi\n"))
	for _, want := range []string{"trainingjob.convoy.dev/mpi created", "Warning:", `violates PodSecurity "restricted:latest"`,
		"spec.framework mpi needs Pod Security level baseline"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply of an MPI job in a restricted namespace:\n%s\nwant %q", out, want)
		}
	}
	e.eventually("the MPI job's status to say its pods were refused", func() (bool, string) {
		j := e.job(e.ns, "mpi")
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionInitializing)
		if c == nil {
			return false, "no Initializing condition; podSecurity " + string(j.Status.PodSecurity)
		}
		return j.Status.PodSecurity == convoy.PodSecurityBaseline && j.Status.Reason == convoy.ReasonPodCreationFailed &&
				strings.Contains(c.Message, "violates PodSecurity"),
			string(j.Status.PodSecurity) + " " + j.Status.Reason + ": " + c.Message
	})
	if n := len(e.pods(e.ns, "mpi")); n != 0 {
		t.Errorf("the MPI job has %d pods in a restricted namespace, want 0", n)
	}

	for _, tc := range []struct{ name, extra, field string }{
		{"mpi-restricted", "  framework: mpi\n  securityContext: {podSecurity: restricted}\n", "spec.securityContext.podSecurity"},
		{"root", "  securityContext: {runAsUser: 0}\n", "spec.securityContext.runAsUser"},
	} {
		out, err := e.Kubectl(ctx, "apply", "-f", job(tc.name, tc.extra))
		if err == nil || !strings.Contains(out, tc.field) {
			t.Errorf("kubectl apply of %s: %v\n%s\nwant it refused naming %s", tc.name, err, out, tc.field)
		}
	}
}

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

package framework

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestKueueWebhookEnabled(t *testing.T) {
	frameworks := []string{"batch/job", "pod", "jobset.x-k8s.io/jobset"}
	cases := map[string]bool{
		"/mutate-kueue-x-k8s-io-v1beta2-clusterqueue":       true,
		"/validate-kueue-x-k8s-io-v1beta2-workload":         true,
		"/mutate-batch-v1-job":                              true,
		"/validate--v1-pod":                                 true,
		"/mutate-jobset-x-k8s-io-v1alpha2-jobset":           true,
		"/mutate-apps-v1-deployment":                        false,
		"/validate-kubeflow-org-v1-pytorchjob":              false,
		"/mutate-workload-codeflare-dev-v1beta2-appwrapper": false,
		"/convert": false,
	}
	for path, want := range cases {
		if got := kueueWebhookEnabled(path, frameworks); got != want {
			t.Errorf("kueueWebhookEnabled(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestLocalKueueConfig(t *testing.T) {
	in := []byte(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health: {healthProbeBindAddress: ":8081"}
webhook: {port: 9443}
leaderElection: {leaderElect: true}
pprofBindAddress: ":8083"
manageJobsWithoutQueueName: false
internalCertManagement: {webhookSecretName: my-secret}
integrations: {frameworks: [batch/job], externalFrameworks: [TrainingJob.v1alpha1.convoy.dev]}
`)
	out, frameworks, names, err := localKueueConfig(in, "127.0.0.1:1", "127.0.0.1:2", 3, "/certs", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"health":         map[string]any{"healthProbeBindAddress": "127.0.0.1:1"},
		"metrics":        map[string]any{"bindAddress": "127.0.0.1:2"},
		"webhook":        map[string]any{"host": "127.0.0.1", "port": float64(3), "certDir": "/certs"},
		"leaderElection": map[string]any{"leaderElect": false},
	}
	for key, w := range want {
		if g, _ := yaml.Marshal(got[key]); string(g) != string(must(yaml.Marshal(w))) {
			t.Errorf("%s = %s, want %s", key, g, must(yaml.Marshal(w)))
		}
	}
	if _, ok := got["pprofBindAddress"]; ok {
		t.Error("pprofBindAddress kept: it would bind a fixed port")
	}
	if got["manageJobsWithoutQueueName"] != false || got["integrations"] == nil {
		t.Errorf("the configuration's own settings were lost: %s", out)
	}
	if len(frameworks) != 1 || frameworks[0] != "batch/job" || names.secret != "my-secret" || names.service != "kueue-webhook-service" {
		t.Errorf("frameworks %v, names %+v", frameworks, names)
	}

	for name, bad := range map[string]string{
		"internal certificates off": "kind: Configuration\ninternalCertManagement: {enable: false}\nintegrations: {frameworks: [batch/job]}\n",
		"no frameworks":             "kind: Configuration\n",
		"not a Configuration":       "kind: ConfigMap\n",
	} {
		if _, _, _, err := localKueueConfig([]byte(bad), "a:1", "a:2", 3, "/c", nil); err == nil || strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: no error", name)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

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

package mlframework

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func init() { Register(convoy.FrameworkTensorFlow, tensorflow{}) }

// tensorflow writes TF_CONFIG: the cluster's worker and ps tasks and the pod's own task. Worker 0
// is MultiWorkerMirroredStrategy's implicit chief; parameter servers run until the workers are
// done and are then stopped.
type tensorflow struct{ Workers }

func (tensorflow) DefaultImage() string { return "tensorflow/tensorflow:2.18.0-gpu" }

func (tensorflow) Replicas(job *convoy.TrainingJob) []Replica {
	return append(replicas(RoleWorker, job.Spec.NumWorkers), replicas(RolePS, job.Spec.NumParameterServers)...)
}

type tfConfig struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        tfTask              `json:"task"`
	Environment string              `json:"environment"`
}

type tfTask struct {
	Type  string `json:"type"`
	Index int32  `json:"index"`
}

func (tensorflow) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	cluster := map[string][]string{}
	for _, rep := range (tensorflow{}).Replicas(job) {
		cluster[string(rep.Role)] = append(cluster[string(rep.Role)], HostPort(job, rep))
	}
	cfg, err := json.Marshal(tfConfig{Cluster: cluster, Task: tfTask{Type: string(r.Role), Index: r.Rank}, Environment: "cloud"})
	if err != nil {
		panic(err) // strings and numbers always marshal
	}
	SetEnv(pod, "TF_CONFIG", string(cfg))
	AddPort(pod, "tf", job.MasterPort())
}

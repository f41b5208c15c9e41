package framework

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

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
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// configured runs the framework's Configure on a bare pod with the job's spec.env and returns the container's environment
// as a map, with the command, for golden comparisons.
func configured(t *testing.T, job *convoy.TrainingJob, r Replica) (map[string]string, []string) {
	t.Helper()
	p, err := For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Command: []string{"train"},
		Env: append([]corev1.EnvVar(nil), job.Spec.Env...)}}}}
	p.Configure(job, r, pod)
	env := map[string]string{}
	for _, v := range pod.Spec.Containers[0].Env {
		if _, dup := env[v.Name]; dup {
			t.Errorf("%s set twice", v.Name)
		}
		env[v.Name] = v.Value
	}
	return env, pod.Spec.Containers[0].Command
}

func TestFrameworkEnvironment(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(4).GPUs(8)
	cases := map[string]struct {
		job         *convoy.TrainingJob
		replica     Replica
		wantEnv     map[string]string
		wantCommand []string
	}{
		"pytorch worker 2 of 4 with 8 GPUs each": {
			job:     base.Clone().Framework(convoy.FrameworkPyTorch).Obj(),
			replica: Replica{Role: RoleWorker, Rank: 2},
			wantEnv: map[string]string{
				"MASTER_ADDR": "llm-worker-0.llm.team-a.svc", "MASTER_PORT": "29500",
				"WORLD_SIZE": "4", "RANK": "2", "NODE_RANK": "2",
				"PET_MASTER_ADDR": "llm-worker-0.llm.team-a.svc", "PET_MASTER_PORT": "29500",
				"PET_NNODES": "4", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "2",
			},
			wantCommand: []string{"train"},
		},
		"pytorch on CPUs runs one process per node on the chosen port": {
			job:     base.Clone().GPUs(0).MasterPort(23456).Obj(),
			replica: Master,
			wantEnv: map[string]string{
				"MASTER_ADDR": "llm-worker-0.llm.team-a.svc", "MASTER_PORT": "23456",
				"WORLD_SIZE": "4", "RANK": "0", "NODE_RANK": "0",
				"PET_MASTER_ADDR": "llm-worker-0.llm.team-a.svc", "PET_MASTER_PORT": "23456",
				"PET_NNODES": "4", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "0",
			},
			wantCommand: []string{"train"},
		},
		"elastic pytorch rendezvouses on worker 0 between minWorkers and numWorkers": {
			job:     base.Clone().Elastic(2, convoy.ElasticSpec{}).Obj(),
			replica: Replica{Role: RoleWorker, Rank: 3},
			wantEnv: map[string]string{
				"PET_NNODES": "2:4", "PET_NPROC_PER_NODE": "8", "PET_RDZV_BACKEND": "c10d",
				"PET_RDZV_ENDPOINT": "llm-worker-0.llm.team-a.svc:29400", "PET_RDZV_ID": "llm-uid", "PET_MAX_RESTARTS": "1000",
				"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
			},
			wantCommand: []string{"train"},
		},
		"elastic pytorch worker 0 hosts the rendezvous store": {
			job:     base.Clone().Elastic(2, convoy.ElasticSpec{}).Obj(),
			replica: Master,
			wantEnv: map[string]string{
				"PET_NNODES": "2:4", "PET_NPROC_PER_NODE": "8", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_CONF": "is_host=1",
				"PET_RDZV_ENDPOINT": "llm-worker-0.llm.team-a.svc:29400", "PET_RDZV_ID": "llm-uid", "PET_MAX_RESTARTS": "1000",
				"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
			},
			wantCommand: []string{"train"},
		},
		"elastic pytorch worker 0 keeps the rendezvous settings of spec.env": {
			job:     base.Clone().Elastic(2, convoy.ElasticSpec{}).Env("PET_RDZV_CONF", "last_call_timeout=2").Obj(),
			replica: Master,
			wantEnv: map[string]string{
				"PET_NNODES": "2:4", "PET_NPROC_PER_NODE": "8", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_CONF": "last_call_timeout=2,is_host=1",
				"PET_RDZV_ENDPOINT": "llm-worker-0.llm.team-a.svc:29400", "PET_RDZV_ID": "llm-uid", "PET_MAX_RESTARTS": "1000",
				"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
			},
			wantCommand: []string{"train"},
		},
		"tensorflow worker with parameter servers": {
			job:     base.Clone().Workers(2).Framework(convoy.FrameworkTensorFlow).ParameterServers(2).Obj(),
			replica: Replica{Role: RoleWorker, Rank: 1},
			wantEnv: map[string]string{
				"TF_CONFIG": `{"cluster":{"ps":["llm-ps-0.llm.team-a.svc:29500","llm-ps-1.llm.team-a.svc:29500"],` +
					`"worker":["llm-worker-0.llm.team-a.svc:29500","llm-worker-1.llm.team-a.svc:29500"]},` +
					`"task":{"type":"worker","index":1},"environment":"cloud"}`,
			},
			wantCommand: []string{"train"},
		},
		"tensorflow parameter server": {
			job:     base.Clone().Workers(1).Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Obj(),
			replica: Replica{Role: RolePS, Rank: 0},
			wantEnv: map[string]string{
				"TF_CONFIG": `{"cluster":{"ps":["llm-ps-0.llm.team-a.svc:29500"],"worker":["llm-worker-0.llm.team-a.svc:29500"]},` +
					`"task":{"type":"ps","index":0},"environment":"cloud"}`,
			},
			wantCommand: []string{"train"},
		},
		"tensorflow without parameter servers lists workers only": {
			job:     base.Clone().Workers(1).Framework(convoy.FrameworkTensorFlow).Obj(),
			replica: Master,
			wantEnv: map[string]string{
				"TF_CONFIG": `{"cluster":{"worker":["llm-worker-0.llm.team-a.svc:29500"]},"task":{"type":"worker","index":0},"environment":"cloud"}`,
			},
			wantCommand: []string{"train"},
		},
		"jax process 3": {
			job:     base.Clone().Framework(convoy.FrameworkJAX).Obj(),
			replica: Replica{Role: RoleWorker, Rank: 3},
			wantEnv: map[string]string{
				"JAX_COORDINATOR_ADDRESS": "llm-worker-0.llm.team-a.svc:29500",
				"JAX_NUM_PROCESSES":       "4",
				"JAX_PROCESS_ID":          "3",
			},
			wantCommand: []string{"train"},
		},
		"mpi launcher on rank 0": {
			job:     base.Clone().Framework(convoy.FrameworkMPI).Obj(),
			replica: Master,
			wantEnv: map[string]string{
				"OMPI_MCA_orte_default_hostfile":        "/etc/mpi/hostfile",
				"OMPI_MCA_orte_keep_fqdn_hostnames":     "true",
				"OMPI_MCA_orte_set_default_slots":       "8",
				"OMPI_MCA_plm_rsh_args":                 "-o ConnectionAttempts=10",
				"I_MPI_HYDRA_HOST_FILE":                 "/etc/mpi/hostfile",
				"I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
			},
			wantCommand: []string{"train"},
		},
		"mpi workers serve ssh": {
			job:         base.Clone().Framework(convoy.FrameworkMPI).Obj(),
			replica:     Replica{Role: RoleWorker, Rank: 1},
			wantEnv:     map[string]string{},
			wantCommand: []string{"/usr/sbin/sshd", "-De"},
		},
		"mxnet scheduler": {
			job:     base.Clone().Framework(convoy.FrameworkMXNet).ParameterServers(2).Obj(),
			replica: Replica{Role: RoleScheduler},
			wantEnv: map[string]string{
				"DMLC_ROLE": "scheduler", "DMLC_PS_ROOT_URI": "llm-scheduler.llm.team-a.svc", "DMLC_PS_ROOT_PORT": "29500",
				"DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "4",
			},
			wantCommand: []string{"train"},
		},
		"mxnet server": {
			job:     base.Clone().Framework(convoy.FrameworkMXNet).ParameterServers(2).Obj(),
			replica: Replica{Role: RolePS, Rank: 1},
			wantEnv: map[string]string{
				"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "llm-scheduler.llm.team-a.svc", "DMLC_PS_ROOT_PORT": "29500",
				"DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "4",
			},
			wantCommand: []string{"train"},
		},
		"mxnet worker": {
			job:     base.Clone().Framework(convoy.FrameworkMXNet).ParameterServers(1).Obj(),
			replica: Replica{Role: RoleWorker, Rank: 3},
			wantEnv: map[string]string{
				"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "llm-scheduler.llm.team-a.svc", "DMLC_PS_ROOT_PORT": "29500",
				"DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "4", "DMLC_WORKER_ID": "3",
			},
			wantCommand: []string{"train"},
		},
		"generic": {
			job:         base.Clone().Framework(convoy.FrameworkGeneric).Obj(),
			replica:     Replica{Role: RoleWorker, Rank: 1},
			wantEnv:     map[string]string{"RANK": "1", "WORLD_SIZE": "4"},
			wantCommand: []string{"train"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env, command := configured(t, tc.job, tc.replica)
			if diff := cmp.Diff(tc.wantEnv, env); diff != "" {
				t.Errorf("environment (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCommand, command); diff != "" {
				t.Errorf("command (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReplicasAndSuccess(t *testing.T) {
	base := utiltesting.MakeTrainingJob("j", "ns").Workers(2)
	w0, w1 := Replica{RoleWorker, 0}, Replica{RoleWorker, 1}
	cases := map[string]struct {
		job         *convoy.TrainingJob
		want        []Replica
		mustSucceed []Replica
		wantNames   []string
	}{
		"pytorch: workers": {
			job: base.Clone().Obj(), want: []Replica{w0, w1}, mustSucceed: []Replica{w0, w1},
			wantNames: []string{"j-worker-0", "j-worker-1"},
		},
		"tensorflow: workers then parameter servers, which need not succeed": {
			job:  base.Clone().Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Obj(),
			want: []Replica{w0, w1, {RolePS, 0}}, mustSucceed: []Replica{w0, w1},
			wantNames: []string{"j-worker-0", "j-worker-1", "j-ps-0"},
		},
		"mxnet: scheduler, servers, workers": {
			job:  base.Clone().Framework(convoy.FrameworkMXNet).ParameterServers(1).Obj(),
			want: []Replica{{RoleScheduler, 0}, {RolePS, 0}, w0, w1}, mustSucceed: []Replica{w0, w1},
			wantNames: []string{"j-scheduler", "j-ps-0", "j-worker-0", "j-worker-1"},
		},
		"mpi: the launcher alone decides success": {
			job:  base.Clone().Framework(convoy.FrameworkMPI).Obj(),
			want: []Replica{w0, w1}, mustSucceed: []Replica{w0},
			wantNames: []string{"j-worker-0", "j-worker-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := For(tc.job.Spec.Framework)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Replicas(tc.job)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Replicas (-want,+got):\n%s", diff)
			}
			var must []Replica
			var names []string
			for _, r := range got {
				if p.MustSucceed(r) {
					must = append(must, r)
				}
				names = append(names, HostName(tc.job, r))
			}
			if diff := cmp.Diff(tc.mustSucceed, must); diff != "" {
				t.Errorf("MustSucceed (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("host names (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPodNames: each restart attempt names the gang's pods apart, so that nothing that follows a
// pod by name (kubectl drain) mistakes a later attempt's pod for it; the hostname, and so every
// address the framework's environment holds, is the same in every attempt.
func TestPodNames(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Framework(convoy.FrameworkMXNet).Workers(2).ParameterServers(1).Obj()
	cases := []struct {
		replica Replica
		attempt int32
		want    string
	}{
		{Replica{RoleWorker, 0}, 0, "llm-worker-0"},
		{Replica{RoleWorker, 0}, 1, "llm-worker-0-r1"},
		{Replica{RoleWorker, 1}, 12, "llm-worker-1-r12"},
		{Replica{RolePS, 0}, 3, "llm-ps-0-r3"},
		{Replica{RoleScheduler, 0}, 0, "llm-scheduler"},
		{Replica{RoleScheduler, 0}, 2, "llm-scheduler-r2"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		got := PodName(job, tc.replica, tc.attempt)
		if got != tc.want {
			t.Errorf("PodName(%v, attempt %d) = %q, want %q", tc.replica, tc.attempt, got, tc.want)
		}
		if seen[got] {
			t.Errorf("two pods named %q", got)
		}
		seen[got] = true
		if host := HostName(job, tc.replica); !strings.HasPrefix(got, host) || Host(job, tc.replica) != host+".llm.ns.svc" {
			t.Errorf("attempt %d of %v: pod %q, host %q, DNS name %q; want the pod named after its host and the DNS name the same in every attempt",
				tc.attempt, tc.replica, got, host, Host(job, tc.replica))
		}
	}
	// The longest job name the API takes (48), the largest rank the hostname's 63 characters
	// leave and the largest attempt: the pod name is still a valid DNS subdomain.
	long := utiltesting.MakeTrainingJob(strings.Repeat("a", 48), "ns").Obj()
	r := Replica{RoleWorker, 9999999}
	if host := HostName(long, r); len(validation.IsDNS1123Label(host)) > 0 {
		t.Errorf("hostname %q is no DNS label: %v", host, validation.IsDNS1123Label(host))
	}
	if name := PodName(long, r, math.MaxInt32); len(validation.IsDNS1123Subdomain(name)) > 0 {
		t.Errorf("pod name %q is no DNS subdomain: %v", name, validation.IsDNS1123Subdomain(name))
	}
}

func TestMPIHostfile(t *testing.T) {
	job := utiltesting.MakeTrainingJob("hvd", "ns").Framework(convoy.FrameworkMPI).Workers(3).GPUs(4).Obj()
	p, _ := For(convoy.FrameworkMPI)
	want := map[string]string{MPIHostfileKey: "hvd-worker-0.hvd.ns.svc slots=4\nhvd-worker-1.hvd.ns.svc slots=4\nhvd-worker-2.hvd.ns.svc slots=4\n"}
	if diff := cmp.Diff(want, p.ConfigFiles(job)); diff != "" {
		t.Errorf("ConfigFiles (-want,+got):\n%s", diff)
	}
	if !p.NeedsSSHKeys() {
		t.Error("mpi must ask for SSH keys")
	}
}

func TestEveryAPIFrameworkIsRegistered(t *testing.T) {
	for _, f := range []convoy.Framework{convoy.FrameworkPyTorch, convoy.FrameworkTensorFlow, convoy.FrameworkJAX,
		convoy.FrameworkMPI, convoy.FrameworkMXNet, convoy.FrameworkGeneric, ""} {
		if _, err := For(f); err != nil {
			t.Errorf("For(%q): %v", f, err)
		}
	}
	if _, err := For("caffe"); err == nil {
		t.Error("For(caffe) succeeded, want an error naming the supported frameworks")
	}
}

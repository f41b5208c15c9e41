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

// Package mlframework wires a distributed-training framework's environment into the pods of a
// TrainingJob. Each framework is one file that registers a Plugin in its init function: adding a
// framework means adding a file here and a value to the API's Framework enum.
package mlframework

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Role is a pod's part in the gang; it is the value of the convoy.dev/role label.
type Role string

const (
	RoleWorker    Role = "worker"
	RolePS        Role = "ps"
	RoleScheduler Role = "scheduler"
)

// Replica names one pod of a gang: its role and its rank within the role.
type Replica struct {
	Role Role
	Rank int32
}

// HostName is the replica's hostname, the same in every restart attempt: <job>-worker-<rank>,
// <job>-ps-<rank> or <job>-scheduler.
func HostName(job *convoy.TrainingJob, r Replica) string {
	if r.Role == RoleScheduler {
		return job.Name + "-scheduler"
	}
	return job.Name + "-" + string(r.Role) + "-" + strconv.Itoa(int(r.Rank))
}

// PodName is the name of the replica's pod in restart attempt attempt (status.restartCount): its
// HostName in attempt 0, and HostName-r<attempt> after, so that no pod of a restarted gang takes
// the name of a pod of an earlier attempt. kubectl drain retries an eviction a
// PodDisruptionBudget refused by the pod's name: a gang moved off the node under the same names
// would be evicted again on its new nodes.
func PodName(job *convoy.TrainingJob, r Replica, attempt int32) string {
	if attempt == 0 {
		return HostName(job, r)
	}
	return HostName(job, r) + "-r" + strconv.Itoa(int(attempt))
}

// Host is the replica's stable DNS name: its hostname in the subdomain of the job's headless Service.
func Host(job *convoy.TrainingJob, r Replica) string {
	return HostName(job, r) + "." + job.Name + "." + job.Namespace + ".svc"
}

// HostPort is Host with the job's rendezvous port.
func HostPort(job *convoy.TrainingJob, r Replica) string {
	return Host(job, r) + ":" + strconv.Itoa(int(job.MasterPort()))
}

// ConfigMapName is the job's ConfigMap, <job>-config: hyperparameters and framework files.
func ConfigMapName(job *convoy.TrainingJob) string { return job.Name + "-config" }

// SSHSecretName is the Secret holding the SSH key pair of frameworks that need one, as the
// job's status records it.
func SSHSecretName(job *convoy.TrainingJob) string { return job.Status.SSHSecretName }

// SSHSecretPrefix is the generateName of the job's SSH Secret, <job>-ssh-: the API server adds a
// suffix no one can know before the Secret exists.
func SSHSecretPrefix(job *convoy.TrainingJob) string { return job.Name + "-ssh-" }

// Master is rank 0 of the workers, where every framework but MXNet rendezvouses.
var Master = Replica{Role: RoleWorker, Rank: 0}

// Plugin is one framework's wiring. Embed Workers for the common defaults.
type Plugin interface {
	// DefaultImage is the image pods run when spec.image is empty.
	DefaultImage() string
	// Replicas lists the gang's pods in a stable order.
	Replicas(job *convoy.TrainingJob) []Replica
	// Configure adds the framework's environment, ports, volumes and command to the pod of r, whose
	// first container is the training container.
	Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod)
	// ConfigFiles are files the framework adds to the job's ConfigMap, by key; nil when none.
	ConfigFiles(job *convoy.TrainingJob) map[string]string
	// NeedsSSHKeys reports whether the pods reach each other over SSH, with the key pair in the
	// Secret SSHSecretName.
	NeedsSSHKeys() bool
	// MustSucceed reports whether the job's success waits for r to exit 0; pods that need not
	// succeed (parameter servers, SSH daemons) are stopped once the others have.
	MustSucceed(r Replica) bool
	// PodSecurity is the most restrictive Pod Security Standard the framework's pods can meet.
	PodSecurity() convoy.PodSecurityLevel
}

// Workers gives a Plugin the defaults of a gang of numWorkers workers with nothing else.
type Workers struct{}

// Replicas returns the workers, by rank: job.WorkerCount() of them.
func (Workers) Replicas(job *convoy.TrainingJob) []Replica {
	return replicas(RoleWorker, job.WorkerCount())
}

// ConfigFiles returns nil.
func (Workers) ConfigFiles(*convoy.TrainingJob) map[string]string { return nil }

// NeedsSSHKeys returns false.
func (Workers) NeedsSSHKeys() bool { return false }

// MustSucceed is true for workers.
func (Workers) MustSucceed(r Replica) bool { return r.Role == RoleWorker }

// PodSecurity is restricted.
func (Workers) PodSecurity() convoy.PodSecurityLevel { return convoy.PodSecurityRestricted }

func replicas(role Role, n int32) []Replica {
	out := make([]Replica, 0, n)
	for i := range n {
		out = append(out, Replica{Role: role, Rank: i})
	}
	return out
}

var (
	mu      sync.RWMutex
	plugins = map[convoy.Framework]Plugin{}
)

// Register makes p the plugin of framework name. It panics when name is registered twice.
func Register(name convoy.Framework, p Plugin) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := plugins[name]; ok {
		panic(fmt.Sprintf("framework %q registered twice", name))
	}
	plugins[name] = p
}

// For returns the plugin of name; an empty name is pytorch, the API's default.
func For(name convoy.Framework) (Plugin, error) {
	if name == "" {
		name = convoy.FrameworkPyTorch
	}
	mu.RLock()
	defer mu.RUnlock()
	if p, ok := plugins[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("spec.framework %q is not supported by this operator; use one of %v", name, names())
}

func names() []convoy.Framework {
	out := make([]convoy.Framework, 0, len(plugins))
	for n := range plugins {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// SetEnv sets environment variables on the pod's first container from name, value pairs,
// replacing a variable of the same name wherever it stands.
func SetEnv(pod *corev1.Pod, pairs ...string) {
	if len(pairs)%2 != 0 {
		panic("SetEnv needs name, value pairs")
	}
	for i := 0; i < len(pairs); i += 2 {
		SetEnvVar(pod, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
}

// SetEnvVar sets v on the pod's first container, replacing a variable of the same name.
func SetEnvVar(pod *corev1.Pod, v corev1.EnvVar) {
	c := &pod.Spec.Containers[0]
	for i := range c.Env {
		if c.Env[i].Name == v.Name {
			c.Env[i] = v
			return
		}
	}
	c.Env = append(c.Env, v)
}

// AddPort exposes a named TCP port on the pod's first container.
func AddPort(pod *corev1.Pod, name string, port int32) {
	c := &pod.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

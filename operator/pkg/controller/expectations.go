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

package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// expectationTTL is how long a created pod may stay out of the cache before it is created again.
const expectationTTL = 30 * time.Second

// expectations remember the pods a reconcile created until the cache shows them, so that the
// reconciles their own events trigger do not create them again (each such Create would be an
// AlreadyExists round trip to the API server).
type expectations struct {
	mu   sync.Mutex
	jobs map[types.UID]*expected
}

type expected struct {
	job     types.NamespacedName
	attempt int32
	names   map[string]time.Time
}

// created records that the job's pods named names were created for restart attempt attempt.
func (e *expectations) created(job *convoy.TrainingJob, names []string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobs == nil {
		e.jobs = map[types.UID]*expected{}
	}
	x := e.jobs[job.UID]
	if x == nil || x.attempt != job.Status.RestartCount {
		x = &expected{job: client.ObjectKeyFromObject(job), attempt: job.Status.RestartCount, names: map[string]time.Time{}}
		e.jobs[job.UID] = x
	}
	for _, n := range names {
		x.names[n] = now
	}
}

// pending filters replicas down to those whose pods are neither in pods nor recently created, and
// forgets the pods the cache now shows.
func (e *expectations) pending(job *convoy.TrainingJob, replicas []mlframework.Replica, pods []*corev1.Pod, now time.Time) []mlframework.Replica {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.jobs[job.UID]
	if x == nil || x.attempt != job.Status.RestartCount {
		delete(e.jobs, job.UID)
		return replicas
	}
	for _, pod := range pods {
		delete(x.names, pod.Name)
	}
	var out []mlframework.Replica
	for _, r := range replicas {
		if at, ok := x.names[mlframework.PodName(job, r, job.Status.RestartCount)]; !ok || now.Sub(at) > expectationTTL {
			out = append(out, r)
		}
	}
	if len(x.names) == 0 {
		delete(e.jobs, job.UID)
	}
	return out
}

// failed forgets a pod whose creation failed, so that the next reconcile tries again.
func (e *expectations) failed(job *convoy.TrainingJob, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.jobs[job.UID]; x != nil {
		delete(x.names, name)
	}
}

// forget drops what is remembered of a deleted job.
func (e *expectations) forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, uid)
}

// forgetDeleted forgets the jobs of name key: a job deleted before any reconcile saw its deletion
// timestamp is known by name only.
func (e *expectations) forgetDeleted(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid, x := range e.jobs {
		if x.job == key {
			delete(e.jobs, uid)
		}
	}
}

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

package builder

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// DefaultImageUser is the UID, GID and fsGroup of the pods of a framework's default image under
// the restricted level: those images are built to run as root, which restricted forbids.
const DefaultImageUser int64 = 1000

// DefaultImageHome is HOME for those pods: the images have no home directory for DefaultImageUser,
// and Python libraries write their caches under HOME.
const DefaultImageHome = "/tmp"

// PodSecurityLevel is the level the job's pods are built to meet: spec.securityContext.podSecurity,
// else the framework's (restricted, baseline for MPI).
func PodSecurityLevel(job *convoy.TrainingJob, p mlframework.Plugin) convoy.PodSecurityLevel {
	if sc := job.Spec.SecurityContext; sc != nil && sc.PodSecurity != "" {
		return sc.PodSecurity
	}
	return p.PodSecurity()
}

// EnforcedPodSecurity is the level a namespace's label pod-security.kubernetes.io/enforce names;
// empty when it names none or privileged.
func EnforcedPodSecurity(ns *corev1.Namespace) convoy.PodSecurityLevel {
	switch l := convoy.PodSecurityLevel(ns.Labels[api.EnforceLevelLabel]); l {
	case convoy.PodSecurityRestricted, convoy.PodSecurityBaseline:
		return l
	}
	return ""
}

// runAsNonRoot tells whether the job's pods get runAsNonRoot: under restricted where the job asks
// for it (or names a non-root runAsUser), where its namespace enforces it, or where the pods run
// the framework's default image (built to run as DefaultImageUser). An image of the user's own runs as its USER, root included,
// elsewhere: the images data scientists already have (pytorch/pytorch, nvcr.io/nvidia/pytorch) run
// as root.
func runAsNonRoot(job *convoy.TrainingJob, p mlframework.Plugin, opts Options) bool {
	if PodSecurityLevel(job, p) != convoy.PodSecurityRestricted {
		return false
	}
	sc := job.Spec.SecurityContext
	asked := sc != nil && (sc.PodSecurity == convoy.PodSecurityRestricted || sc.RunAsUser != nil && *sc.RunAsUser != 0)
	return asked || opts.EnforcedPodSecurity == convoy.PodSecurityRestricted || job.Spec.Image == ""
}

// setSecurityContext sets spec.securityContext's user and groups and, where runAsNonRoot says,
// runAsNonRoot, with the default image's user and HOME when the job names no image.
func setSecurityContext(job *convoy.TrainingJob, p mlframework.Plugin, opts Options, pod *corev1.Pod) {
	psc := pod.Spec.SecurityContext
	if sc := job.Spec.SecurityContext; sc != nil {
		psc.RunAsUser, psc.RunAsGroup, psc.FSGroup = copyID(sc.RunAsUser), copyID(sc.RunAsGroup), copyID(sc.FSGroup)
	}
	if !runAsNonRoot(job, p, opts) {
		return
	}
	psc.RunAsNonRoot = ptr.To(true)
	if job.Spec.Image != "" {
		return
	}
	for _, id := range []**int64{&psc.RunAsUser, &psc.RunAsGroup, &psc.FSGroup} {
		if *id == nil {
			*id = ptr.To(DefaultImageUser)
		}
	}
	if !slices.ContainsFunc(job.Spec.Env, func(e corev1.EnvVar) bool { return e.Name == "HOME" }) {
		mlframework.SetEnv(pod, "HOME", DefaultImageHome)
	}
}

// copyID copies an optional ID, so that the pod shares no memory with the job.
func copyID(id *int64) *int64 {
	if id == nil {
		return nil
	}
	return ptr.To(*id)
}

// evaluator judges pods by the Pod Security Standards as the API server's admission does.
var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err) // the library's own checks
	}
	return e
}()

// MeetsPodSecurity is the most restrictive level the job's pods meet, judged on the first and the
// last pod of each role: pods of a role differ only in their rank.
func MeetsPodSecurity(job *convoy.TrainingJob, p mlframework.Plugin, opts Options) convoy.PodSecurityLevel {
	replicas := p.Replicas(job)
	var pods []*corev1.Pod
	for i, r := range replicas {
		if i == 0 || i == len(replicas)-1 || replicas[i-1].Role != r.Role || replicas[i+1].Role != r.Role {
			pods = append(pods, Pod(job, r, p, opts))
		}
	}
	return PodsMeet(pods)
}

// PodsMeet returns the most restrictive level every one of pods meets, by the latest
// version of the Pod Security Standards.
func PodsMeet(pods []*corev1.Pod) convoy.PodSecurityLevel {
	for _, level := range []api.Level{api.LevelRestricted, api.LevelBaseline} {
		lv := api.LevelVersion{Level: level, Version: api.LatestVersion()}
		if !slices.ContainsFunc(pods, func(pod *corev1.Pod) bool {
			return !policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec)).Allowed
		}) {
			return convoy.PodSecurityLevel(level)
		}
	}
	return convoy.PodSecurityPrivileged
}

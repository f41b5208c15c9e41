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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestPodSecurity checks the pod security context and HOME each kind of job gets, and the Pod
// Security level its pods meet as the API server's admission library judges them.
func TestPodSecurity(t *testing.T) {
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	user := ptr.To(DefaultImageUser)
	cases := map[string]struct {
		job *convoy.TrainingJob
		// enforced is the level the job's namespace enforces.
		enforced convoy.PodSecurityLevel
		want     *corev1.PodSecurityContext
		// home is HOME in the container, "" when not set.
		home  string
		level convoy.PodSecurityLevel
	}{
		"default image runs as 1000 with HOME=/tmp": {
			job:   utiltesting.MakeTrainingJob("llm", "ns").Image("").Obj(),
			want:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: user, RunAsGroup: user, FSGroup: user, SeccompProfile: seccomp},
			home:  "/tmp",
			level: convoy.PodSecurityRestricted,
		},
		"default image keeps the user's HOME and UID": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Image("").Env("HOME", "/work").
				SecurityContext(convoy.JobSecurityContext{RunAsUser: ptr.To[int64](4242)}).Obj(),
			want:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](4242), RunAsGroup: user, FSGroup: user, SeccompProfile: seccomp},
			home:  "/work",
			level: convoy.PodSecurityRestricted,
		},
		"own image runs as its USER, root included, where the namespace enforces nothing": {
			job:   utiltesting.MakeTrainingJob("llm", "ns").Image("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime").Obj(),
			want:  &corev1.PodSecurityContext{SeccompProfile: seccomp},
			level: convoy.PodSecurityBaseline,
		},
		"own image is made non-root where the namespace enforces restricted": {
			job:      utiltesting.MakeTrainingJob("llm", "ns").Image("ghcr.io/org/trainer:v1").Obj(),
			enforced: convoy.PodSecurityRestricted,
			want:     &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: seccomp},
			level:    convoy.PodSecurityRestricted,
		},
		"own image is made non-root where the job asks restricted": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Image("ghcr.io/org/trainer:v1").
				SecurityContext(convoy.JobSecurityContext{PodSecurity: convoy.PodSecurityRestricted}).Obj(),
			want:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: seccomp},
			level: convoy.PodSecurityRestricted,
		},
		"own image with the user and groups of the spec": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Image("ghcr.io/org/trainer:v1").
				SecurityContext(convoy.JobSecurityContext{RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](4000)}).Obj(),
			want: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](3000),
				FSGroup: ptr.To[int64](4000), SeccompProfile: seccomp},
			level: convoy.PodSecurityRestricted,
		},
		"baseline may run as root": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Image("").
				SecurityContext(convoy.JobSecurityContext{PodSecurity: convoy.PodSecurityBaseline, RunAsUser: ptr.To[int64](0)}).Obj(),
			want:  &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), SeccompProfile: seccomp},
			level: convoy.PodSecurityBaseline,
		},
		"baseline sets no runAsNonRoot": {
			job: utiltesting.MakeTrainingJob("llm", "ns").
				SecurityContext(convoy.JobSecurityContext{PodSecurity: convoy.PodSecurityBaseline}).Obj(),
			want:  &corev1.PodSecurityContext{SeccompProfile: seccomp},
			level: convoy.PodSecurityBaseline,
		},
		"mpi is baseline: sshd as root with SETUID, SETGID and SYS_CHROOT": {
			job:   utiltesting.MakeTrainingJob("mpi", "ns").Image("").Framework(convoy.FrameworkMPI).Workers(3).Obj(),
			want:  &corev1.PodSecurityContext{SeccompProfile: seccomp},
			level: convoy.PodSecurityBaseline,
		},
		"an NFS checkpoint volume is only baseline": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageNFS, NFS: &convoy.NFSStorage{Server: "nfs.example.com", Path: "/ckpt"}}}).Obj(),
			enforced: convoy.PodSecurityRestricted,
			want:     &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: seccomp},
			level:    convoy.PodSecurityBaseline,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := mlframework.For(tc.job.Spec.Framework)
			if err != nil {
				t.Fatal(err)
			}
			opts := opts
			opts.EnforcedPodSecurity = tc.enforced
			for _, pod := range Pods(tc.job, p, opts) {
				if diff := cmp.Diff(tc.want, pod.Spec.SecurityContext); diff != "" {
					t.Errorf("%s securityContext (-want,+got):\n%s", pod.Name, diff)
				}
				home := ""
				for _, e := range pod.Spec.Containers[0].Env {
					if e.Name == "HOME" {
						home = e.Value
					}
				}
				if home != tc.home {
					t.Errorf("%s HOME = %q, want %q", pod.Name, home, tc.home)
				}
			}
			if got := MeetsPodSecurity(tc.job, p, opts); got != tc.level {
				t.Errorf("MeetsPodSecurity = %s, want %s", got, tc.level)
			}
		})
	}
}

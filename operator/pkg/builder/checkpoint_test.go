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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestCheckpointVolumes: where each kind of storage is mounted and what the pods are told: the
// job's checkpoints read-only, the restart attempt's own directory read-write, so that the pods of
// an attempt before (still running on a lost node) cannot write where this attempt's do.
func TestCheckpointVolumes(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2)
	claim := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	// The root read-only at path (the volume's subPath sub of it), the attempt's subPath read-write.
	mounts := func(path, sub, attempt string) []corev1.VolumeMount {
		return []corev1.VolumeMount{{Name: "checkpoints", MountPath: path, SubPath: sub, ReadOnly: true},
			{Name: "checkpoints", MountPath: CheckpointDir + "/" + attempt, SubPath: attempt}}
	}
	cases := map[string]struct {
		job        *convoy.TrainingJob
		wantVolume corev1.VolumeSource
		wantMounts []corev1.VolumeMount
		wantURI    string // the default prefix's when empty
	}{
		"enabled without storage: the job's own claim, whole, at /checkpoints": {
			job:        base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Frequency: 5}).Obj(),
			wantVolume: claim("llm-checkpoints"),
			wantMounts: mounts("/checkpoints", "", "team-a/llm/attempt-0"),
		},
		"type pvc without claimName, restarted twice: the job's own claim, attempt-2 writable": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StoragePVC, Size: ptr.To(resource.MustParse("1Ti")), StorageClassName: "fast"}}).
				Status(convoy.TrainingJobStatus{RestartCount: 2}).Obj(),
			wantVolume: claim("llm-checkpoints"),
			wantMounts: mounts("/checkpoints", "", "team-a/llm/attempt-2"),
		},
		"a shared claim: only the subPath <namespace>/<job>": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StoragePVC, ClaimName: "team-checkpoints"}}).Obj(),
			wantVolume: claim("team-checkpoints"),
			wantMounts: mounts("/checkpoints/team-a/llm", "team-a/llm", "team-a/llm/attempt-0"),
		},
		"a shared claim with a prefix: only the subPath prefix": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StoragePVC, ClaimName: "team-checkpoints", Prefix: "runs/7"}}).
				Status(convoy.TrainingJobStatus{RestartCount: 1}).Obj(),
			wantVolume: claim("team-checkpoints"),
			wantMounts: mounts("/checkpoints/runs/7", "runs/7", "runs/7/attempt-1"),
			wantURI:    "/checkpoints/runs/7",
		},
		"nfs: the export, whole, at /checkpoints": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageNFS, NFS: &convoy.NFSStorage{Server: "nfs.local", Path: "/export"}}}).
				Status(convoy.TrainingJobStatus{RestartCount: 3}).Obj(),
			wantVolume: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.local", Path: "/export"}},
			wantMounts: mounts("/checkpoints", "", "team-a/llm/attempt-3"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := Pod(tc.job, mlframework.Replica{Role: mlframework.RoleWorker}, plugin(t, convoy.FrameworkPyTorch), opts)
			mounts := slices.DeleteFunc(slices.Clone(pod.Spec.Containers[0].VolumeMounts), func(m corev1.VolumeMount) bool { return m.Name != "checkpoints" })
			if diff := cmp.Diff(tc.wantMounts, mounts); diff != "" {
				t.Errorf("checkpoints mounts (-want,+got):\n%s", diff)
			}
			wantURI := tc.wantURI
			if wantURI == "" {
				wantURI = "/checkpoints/team-a/llm"
			}
			wantEnv(t, pod, "CONVOY_CHECKPOINT_ROOT", wantURI)
			wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", tc.wantMounts[1].MountPath)
			if got := CheckpointURI(tc.job); got != wantURI {
				t.Errorf("CheckpointURI = %q, want %q", got, wantURI)
			}
			volumes := slices.DeleteFunc(slices.Clone(pod.Spec.Volumes), func(v corev1.Volume) bool { return v.Name != "checkpoints" })
			if diff := cmp.Diff([]corev1.Volume{{Name: "checkpoints", VolumeSource: tc.wantVolume}}, volumes); diff != "" {
				t.Errorf("checkpoints volume (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCheckpointAttempts: each restart attempt writes under a location of its own, the pods of the
// attempt before keep theirs, and both resume from the latest checkpoint, whichever attempt wrote it.
func TestCheckpointAttempts(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}})
	cases := map[string]struct {
		status              convoy.TrainingJobStatus
		copy                types.UID // the UID of MultiKueue's copy on a worker
		resumeFrom          string
		wantURI, wantResume string
	}{
		"the first attempt": {wantURI: "s3://ckpt/team-a/llm/attempt-0"},
		"the first attempt on a MultiKueue worker after another was lost": {
			copy:       "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
			resumeFrom: "s3://ckpt/team-a/llm/attempt-1-9a8b7c6d/epoch-6",
			wantURI:    "s3://ckpt/team-a/llm/attempt-0-0f1e2d3c",
			wantResume: "s3://ckpt/team-a/llm/attempt-1-9a8b7c6d/epoch-6",
		},
		"restarted on that worker after it checkpointed": {
			copy:       "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
			status:     convoy.TrainingJobStatus{RestartCount: 1, Checkpoint: &convoy.CheckpointStatus{Latest: "s3://ckpt/team-a/llm/attempt-0-0f1e2d3c/epoch-8"}},
			resumeFrom: "s3://ckpt/team-a/llm/attempt-1-9a8b7c6d/epoch-6",
			wantURI:    "s3://ckpt/team-a/llm/attempt-1-0f1e2d3c",
			wantResume: "s3://ckpt/team-a/llm/attempt-0-0f1e2d3c/epoch-8",
		},
		"restarted after attempt 0 checkpointed": {
			status:     convoy.TrainingJobStatus{RestartCount: 1, Checkpoint: &convoy.CheckpointStatus{Latest: "s3://ckpt/team-a/llm/attempt-0/epoch-4"}},
			wantURI:    "s3://ckpt/team-a/llm/attempt-1",
			wantResume: "s3://ckpt/team-a/llm/attempt-0/epoch-4",
		},
		"restarted again before attempt 1 checkpointed": {
			status:     convoy.TrainingJobStatus{RestartCount: 2, Checkpoint: &convoy.CheckpointStatus{Latest: "s3://ckpt/team-a/llm/attempt-0/epoch-4"}},
			wantURI:    "s3://ckpt/team-a/llm/attempt-2",
			wantResume: "s3://ckpt/team-a/llm/attempt-0/epoch-4",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := base.Clone().Status(tc.status).Obj()
			if tc.resumeFrom != "" {
				job.Annotations = map[string]string{convoy.AnnotationResumeFrom: tc.resumeFrom}
			}
			if tc.copy != "" {
				job.UID = tc.copy
				job.Labels = map[string]string{kueue.MultiKueueOriginLabel: "manager"}
			}
			pod := Pod(job, mlframework.Replica{Role: mlframework.RoleWorker}, plugin(t, convoy.FrameworkPyTorch), opts)
			wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", tc.wantURI)
			wantEnv(t, pod, "CONVOY_CHECKPOINT_ROOT", "s3://ckpt/team-a/llm")
			wantEnv(t, pod, "CONVOY_RESUME_FROM", tc.wantResume)
			if got := AttemptCheckpointURI(job); got != tc.wantURI {
				t.Errorf("AttemptCheckpointURI = %q, want %q", got, tc.wantURI)
			}
		})
	}
}

func TestCheckpointClaim(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2)
	enabled := convoy.CheckpointSpec{Enabled: true, Frequency: 5}
	claim := func(modes []corev1.PersistentVolumeAccessMode, size string, class *string, owners []metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "llm-checkpoints", Namespace: "team-a",
				Labels: map[string]string{"convoy.dev/job-name": "llm"}, OwnerReferences: owners},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      modes,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
				StorageClassName: class,
			},
		}
	}
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want *corev1.PersistentVolumeClaim
	}{
		"no storage: 10Gi of the default class, ReadWriteMany for a gang, not owned (Retain)": {
			job:  base.Clone().Checkpoint(enabled).Obj(),
			want: claim(rwx, "10Gi", nil, nil),
		},
		"one worker: ReadWriteOnce": {
			job:  base.Clone().Workers(1).Checkpoint(enabled).Obj(),
			want: claim(rwo, "10Gi", nil, nil),
		},
		"one worker that partial admission may have shrunk: ReadWriteMany": {
			job:  base.Clone().Workers(1).MinWorkers(1).Checkpoint(enabled).Obj(),
			want: claim(rwx, "10Gi", nil, nil),
		},
		"class, size, access modes and Delete as asked": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StoragePVC, StorageClassName: "fast", Size: ptr.To(resource.MustParse("1Ti")),
				AccessModes: rwo, ReclaimPolicy: convoy.ReclaimDelete}}).Obj(),
			want: claim(rwo, "1Ti", ptr.To("fast"), owner("llm")),
		},
		"a claim named in the spec: none": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StoragePVC, ClaimName: "mine"}}).Obj(),
		},
		"s3: none": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj(),
		},
		"checkpointing off: none": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{ResumeFrom: "/models/base"}).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.UID = "llm-uid"
			if diff := cmp.Diff(tc.want, CheckpointClaim(tc.job)); diff != "" {
				t.Errorf("CheckpointClaim (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestIsOwnCheckpointClaim(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Obj()
	job.UID = "llm-uid"
	other := metav1.OwnerReference{APIVersion: "convoy.dev/v1alpha1", Kind: "TrainingJob", Name: "llm", UID: "earlier-uid", Controller: ptr.To(true)}
	labelled := map[string]string{convoy.LabelJobName: "llm"}
	cases := map[string]struct {
		meta metav1.ObjectMeta
		want bool
	}{
		"controlled by the job":                        {meta: metav1.ObjectMeta{Labels: labelled, OwnerReferences: owner("llm")}, want: true},
		"retained: labelled, no controller":            {meta: metav1.ObjectMeta{Labels: labelled}, want: true},
		"someone else's claim of that name":            {meta: metav1.ObjectMeta{}},
		"labelled for another job":                     {meta: metav1.ObjectMeta{Labels: map[string]string{convoy.LabelJobName: "other"}}},
		"labelled, controlled by an earlier same-name": {meta: metav1.ObjectMeta{Labels: labelled, OwnerReferences: []metav1.OwnerReference{other}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: tc.meta}
			if got := IsOwnCheckpointClaim(job, pvc); got != tc.want {
				t.Errorf("IsOwnCheckpointClaim = %v, want %v", got, tc.want)
			}
		})
	}
}

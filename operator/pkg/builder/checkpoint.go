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
	"cmp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// AzureWorkloadIdentityLabel, "true" on the pods of a job that checkpoints to Azure as a
// ServiceAccount, has Azure Workload Identity's webhook project the identity's token into them.
const AzureWorkloadIdentityLabel = "azure.workload.identity/use"

// DefaultCheckpointSize is the capacity of the claim the operator creates for a job's checkpoints
// when spec.checkpoint.storage.size is unset.
var DefaultCheckpointSize = resource.MustParse("10Gi")

// CheckpointClaimName is the PersistentVolumeClaim the operator creates for a job's checkpoints.
func CheckpointClaimName(job *convoy.TrainingJob) string { return job.Name + "-checkpoints" }

// checkpointStorage is the job's checkpoint storage with its type defaulted, nil when
// checkpointing is off. Enabled without storage is a claim of the job's own.
func checkpointStorage(job *convoy.TrainingJob) *convoy.CheckpointStorage {
	cp := job.Spec.Checkpoint
	if cp == nil || !cp.Enabled {
		return nil
	}
	s := convoy.CheckpointStorage{}
	if cp.Storage != nil {
		s = *cp.Storage
	}
	s.Type = cmp.Or(s.Type, convoy.StoragePVC)
	return &s
}

// ownsClaim reports whether the job checkpoints to a claim the operator creates for it.
func ownsClaim(s *convoy.CheckpointStorage) bool {
	return s != nil && s.Type == convoy.StoragePVC && s.ClaimName == ""
}

// checkpointPrefix is the job's directory in its storage: storage.prefix, else <namespace>/<job>.
func checkpointPrefix(job *convoy.TrainingJob, s *convoy.CheckpointStorage) string {
	return cmp.Or(s.Prefix, job.Namespace+"/"+job.Name)
}

// CheckpointClaim is the PersistentVolumeClaim <job>-checkpoints that holds the checkpoints of a
// job without a claim of its own choosing; nil for any other job. It is labelled with the job;
// under reclaimPolicy Delete the job is its controller, so it goes with the job, and under
// Retain (the default) nothing owns it, so it outlives the job.
func CheckpointClaim(job *convoy.TrainingJob) *corev1.PersistentVolumeClaim {
	s := checkpointStorage(job)
	if !ownsClaim(s) {
		return nil
	}
	modes := s.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		if job.Spec.NumWorkers == 1 && job.Spec.NumParameterServers == 0 && job.Spec.MinWorkers == nil {
			modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
	}
	size := DefaultCheckpointSize
	if s.Size != nil {
		size = *s.Size
	}
	meta := objectMeta(job, CheckpointClaimName(job), JobLabels(job))
	if s.ReclaimPolicy != convoy.ReclaimDelete {
		meta.OwnerReferences = nil
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), modes...),
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if s.StorageClassName != "" {
		pvc.Spec.StorageClassName = &s.StorageClassName
	}
	return pvc
}

// IsOwnCheckpointClaim reports whether claim, named CheckpointClaimName(job), may hold the job's
// checkpoints: the job controls it, or nothing controls it and it is labelled with the job's
// name (a retained claim of the job, or of an earlier job of the same name).
func IsOwnCheckpointClaim(job *convoy.TrainingJob, claim metav1.Object) bool {
	if metav1.IsControlledBy(claim, job) {
		return true
	}
	return metav1.GetControllerOf(claim) == nil && claim.GetLabels()[convoy.LabelJobName] == job.Name
}

// setCheckpoint wires checkpoint storage and tells the code where to resume: the latest checkpoint
// it reported; before it reported any, the one a MultiKueue manager copied with the job from the
// worker it ran on before (convoy.dev/resume-from), else spec.checkpoint.resumeFrom.
func setCheckpoint(job *convoy.TrainingJob, pod *corev1.Pod) {
	cp := job.Spec.Checkpoint
	resume := ""
	if cp != nil {
		resume = cp.ResumeFrom
	}
	if from := job.Annotations[convoy.AnnotationResumeFrom]; from != "" {
		resume = from
	}
	if s := job.Status.Checkpoint; s != nil && s.Latest != "" {
		resume = s.Latest
	}
	if resume != "" {
		mlframework.SetEnv(pod, "CONVOY_RESUME_FROM", resume)
	}
	s := checkpointStorage(job)
	if s == nil {
		return
	}
	uri := CheckpointURI(job)
	mountCheckpoints(job, s, pod, true)
	setStorageEnv(job, s, pod)
	mlframework.SetEnv(pod,
		"CONVOY_CHECKPOINT_URI", AttemptCheckpointURI(job),
		"CONVOY_CHECKPOINT_ROOT", uri,
		"CONVOY_CHECKPOINT_FREQUENCY", strconv.Itoa(int(max(cp.Frequency, 1))),
	)
	if cp.IntervalSeconds != nil {
		mlframework.SetEnv(pod, "CONVOY_CHECKPOINT_INTERVAL_SECONDS", itoa(*cp.IntervalSeconds))
	}
	if cp.Retention != nil {
		mlframework.SetEnv(pod, "CONVOY_CHECKPOINT_RETENTION", itoa(*cp.Retention))
	}
	if m := job.Spec.Monitoring; m != nil && m.TensorboardEnabled {
		mlframework.SetEnv(pod, "TENSORBOARD_LOG_DIR", AttemptCheckpointURI(job)+"/tensorboard")
	}
}

// setStorageEnv gives the pod's first container what an object storage client reads: the endpoint,
// region or account, the credentials Secret's keys as variables, and the label Azure Workload
// Identity needs when the job runs as a ServiceAccount of its own.
func setStorageEnv(job *convoy.TrainingJob, s *convoy.CheckpointStorage, pod *corev1.Pod) {
	switch s.Type {
	case convoy.StorageS3:
		if s.S3Endpoint != "" {
			mlframework.SetEnv(pod, "AWS_ENDPOINT_URL", s.S3Endpoint)
		}
		if s.S3Region != "" {
			mlframework.SetEnv(pod, "AWS_REGION", s.S3Region, "AWS_DEFAULT_REGION", s.S3Region)
		}
		if s.S3Access == convoy.S3AccessPresigned {
			// The SDK asks the progress endpoint for a pre-signed URL per object (progress/presign.go).
			mlframework.SetEnv(pod, "CONVOY_CHECKPOINT_PRESIGN", "1")
		}
	case convoy.StorageGCS:
		if s.GCSAccess == convoy.GCSAccessPresigned {
			// The SDK asks the progress endpoint for a V4 signed URL per object (progress/presign_gcs.go).
			mlframework.SetEnv(pod, "CONVOY_CHECKPOINT_PRESIGN", "1")
		}
	case convoy.StorageAzure:
		if s.AzureStorageAccount != "" {
			mlframework.SetEnv(pod, "AZURE_STORAGE_ACCOUNT", s.AzureStorageAccount)
		}
		if s.AzureAccess == convoy.AzureAccessPresigned {
			// The SDK asks the progress endpoint for a SAS URL per blob (progress/presign_azure.go).
			mlframework.SetEnv(pod, "CONVOY_CHECKPOINT_PRESIGN", "1")
		}
		if job.Spec.ServiceAccountName != "" {
			// Azure Workload Identity's webhook gives the ServiceAccount's identity (its token and
			// AZURE_* variables) only to pods labelled so.
			pod.Labels[AzureWorkloadIdentityLabel] = "true"
		}
	}
	if s.CredentialsSecretRef != nil {
		c := &pod.Spec.Containers[0]
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *s.CredentialsSecretRef}})
	}
}

// mountCheckpoints mounts a pvc or nfs checkpoint storage read-only, so that the job's
// checkpoints lie under CheckpointURI, and, with attempt, the current restart attempt's directory
// read-write at AttemptCheckpointURI: the pods of an attempt before, which may still run on a lost
// node, cannot write in it, nor this attempt's pods in theirs. The kubelet creates a subPath
// missing from the volume. It reports whether the storage is a file system it mounted.
func mountCheckpoints(job *convoy.TrainingJob, s *convoy.CheckpointStorage, pod *corev1.Pod, attempt bool) bool {
	prefix := checkpointPrefix(job, s)
	root := corev1.VolumeMount{Name: "checkpoints", MountPath: CheckpointDir, ReadOnly: true}
	v := corev1.Volume{Name: root.Name}
	switch s.Type {
	case convoy.StoragePVC:
		claim := CheckpointClaimName(job)
		if !ownsClaim(s) {
			// A claim named in the spec may be shared: the job sees only its own directory.
			claim, root.MountPath, root.SubPath = s.ClaimName, CheckpointURI(job), prefix
		}
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
	case convoy.StorageNFS:
		v.NFS = &corev1.NFSVolumeSource{Server: s.NFS.Server, Path: s.NFS.Path}
	default:
		return false
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, root)
	if attempt {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: AttemptCheckpointURI(job),
			SubPath: prefix + "/" + attemptDir(job)})
	}
	return true
}

// CheckpointURI is the job's checkpoint location, every restart attempt's checkpoints under it
// (CONVOY_CHECKPOINT_ROOT): the storage's prefix, <namespace>/<name> by default, under the mount
// path or bucket. It is empty when checkpointing is off.
func CheckpointURI(job *convoy.TrainingJob) string {
	s := checkpointStorage(job)
	if s == nil {
		return ""
	}
	prefix := checkpointPrefix(job, s)
	switch s.Type {
	case convoy.StoragePVC, convoy.StorageNFS:
		return CheckpointDir + "/" + prefix
	case convoy.StorageS3:
		return "s3://" + s.S3Bucket + "/" + prefix
	case convoy.StorageGCS:
		return "gs://" + s.GCSBucket + "/" + prefix
	case convoy.StorageAzure:
		return "az://" + s.AzureContainer + "/" + prefix
	}
	return ""
}

// AttemptCheckpointURI is where the pods of the gang's current restart attempt write checkpoints
// (CONVOY_CHECKPOINT_URI): attempt-<status.restartCount> under CheckpointURI (see attemptDir). The pods of an
// attempt before, which may still run (their node lost, the pods force-deleted), write elsewhere;
// CONVOY_RESUME_FROM names the latest checkpoint, whichever attempt wrote it. It is empty when
// checkpointing is off.
func AttemptCheckpointURI(job *convoy.TrainingJob) string {
	uri := CheckpointURI(job)
	if uri == "" {
		return ""
	}
	return uri + "/" + attemptDir(job)
}

// attemptDir is the current restart attempt's directory under CheckpointURI. On a MultiKueue
// worker the restart count starts again at 0 whenever the job is dispatched anew, while the copy on
// a lost worker may still run: there the directory also carries the copy's UID, so that two
// dispatches never write in one directory.
func attemptDir(job *convoy.TrainingJob) string {
	dir := "attempt-" + itoa(job.Status.RestartCount)
	if _, copied := job.Labels[kueue.MultiKueueOriginLabel]; copied && job.UID != "" {
		dir += "-" + string(job.UID)[:min(8, len(job.UID))]
	}
	return dir
}

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
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
)

// RolePublish is the convoy.dev/role of a job's publish pod, which is not part of its gang.
const RolePublish = "publish"

// PublishContainerName is the publish pod's container.
const PublishContainerName = "publish"

// RegistryConfigDir is where the publish pod mounts spec.output.model.credentialsSecretRef's
// .dockerconfigjson, as config.json.
const RegistryConfigDir = "/var/run/secrets/convoy.dev/registry"

// presignedModel is why a job whose pods read checkpoints through the operator's pre-signed URLs
// cannot publish; the API refuses the combination at apply with the same words.
const presignedModel = "spec.output.model is published with the job's own identity, not the operator's pre-signed URLs: remove spec.checkpoint.storage.s3Access, gcsAccess or azureAccess presigned and give serviceAccountName or credentialsSecretRef access to the bucket, or remove spec.output.model"

// PublishPodName is the name of the pod that publishes a job's model.
func PublishPodName(job *convoy.TrainingJob) string { return job.Name + "-publish" }

// PublishPod is the pod that pushes the job's final checkpoint (status.checkpoint.latest) to
// spec.output.model.image: the operator's image running `convoy-operator publish`, with the
// checkpoint storage mounted read-only at CheckpointDir, which it reads nothing outside of (on s3,
// gcs or azure, the job's identity and storage environment, its prefix, which it reads nothing
// outside of, and a scratch /tmp), and
// the credentials Secret as a Docker config outside it. It carries
// the job-name label (the operator's cache sees it) but not the gang's PodGroup label, and runs
// on the default scheduler: it is no part of the gang, and Kueue, which treats TrainingJobs as the
// owners of their pods, does not queue it. The error says why the model cannot be published.
func PublishPod(job *convoy.TrainingJob, opts Options) (*corev1.Pod, error) {
	out := job.Spec.Output.Model
	cp := job.Status.Checkpoint
	if cp == nil || cp.Latest == "" {
		return nil, fmt.Errorf("the job reported no checkpoint (status.checkpoint is empty): report the final one with convoy.checkpoint_saved")
	}
	if opts.PublishImage == "" {
		return nil, fmt.Errorf("the operator does not know the image to publish with: run it with --publish-image, or with POD_NAME set so that it reads its own image")
	}
	args := []string{"publish", "--checkpoint=" + cp.Latest, "--root=" + CheckpointDir, "--image=" + out.Image}
	if ref, err := publish.ParseReference(out.Image); err == nil && slices.Contains(opts.PlainHTTPRegistries, ref.Registry) {
		args = append(args, "--plain-http")
	}
	annotations, err := publishAnnotations(job)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		args = append(args, "--annotation="+k+"="+annotations[k])
	}
	labels := JobLabels(job)
	labels[convoy.LabelTrainingJob] = job.Name
	labels[convoy.LabelReplicaRole] = RolePublish
	pod := &corev1.Pod{
		ObjectMeta: objectMeta(job, PublishPodName(job), labels),
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			EnableServiceLinks:           ptr.To(false),
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    PublishContainerName,
				Image:   opts.PublishImage,
				Command: []string{"/convoy-operator"},
				Args:    args,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				// The result (reference and digest) or the error, for the operator to read.
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	// The job's identity reads its bucket, as in the training pods.
	runAsServiceAccount(job, pod)
	switch s := checkpointStorage(job); {
	case s != nil && (s.S3Access != "" || s.GCSAccess != "" || s.AzureAccess != ""):
		return nil, errors.New(presignedModel)
	case s != nil && (s.Type == convoy.StorageS3 || s.Type == convoy.StorageGCS || s.Type == convoy.StorageAzure):
		// The objects are read with the job's own identity and the training pods' storage
		// environment, from its own prefix only, into a scratch directory.
		setStorageEnv(job, s, pod)
		c := &pod.Spec.Containers[0]
		c.Args[2] = "--root=" + CheckpointURI(job)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/tmp"})
	case s == nil || !mountCheckpoints(job, s, pod, false):
		return nil, fmt.Errorf("the checkpoint %s is on no checkpoint storage of the job (spec.checkpoint is off)", cp.Latest)
	}
	// status.checkpoint.latest is checked again against the job's storage as the spec says now.
	if loc := CheckpointURI(job); !progress.Under(cp.Latest, loc) {
		return nil, fmt.Errorf("status.checkpoint.latest %q is not under the job's checkpoint location %s: the operator publishes only from there", cp.Latest, loc)
	}
	c := &pod.Spec.Containers[0]
	if ref := out.CredentialsSecretRef; ref != nil {
		addVolume(pod, corev1.Volume{Name: "registry", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: ref.Name, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}}, RegistryConfigDir)
		c.Args = append(c.Args, "--docker-config="+RegistryConfigDir+"/config.json")
	}
	return pod, nil
}

// publishAnnotations are the artifact's annotations: the job, the checkpoint, its epoch and the
// latest metrics the job reported.
func publishAnnotations(job *convoy.TrainingJob) (map[string]string, error) {
	cp := job.Status.Checkpoint
	a := map[string]string{
		publish.AnnotationJob:        job.Namespace + "/" + job.Name,
		publish.AnnotationCheckpoint: cp.Latest,
		publish.AnnotationEpoch:      strconv.Itoa(int(cp.Epoch)),
	}
	if m := job.Status.Metrics; m != nil {
		metrics := map[string]any{}
		for k, v := range m.Additional {
			metrics[k] = v
		}
		if m.Loss != nil {
			metrics["loss"] = *m.Loss
		}
		if m.Accuracy != nil {
			metrics["accuracy"] = *m.Accuracy
		}
		if m.Step != 0 {
			metrics["step"] = m.Step
		}
		b, err := json.Marshal(metrics)
		if err != nil {
			return nil, err
		}
		a[publish.AnnotationMetrics] = string(b)
	}
	return a, nil
}

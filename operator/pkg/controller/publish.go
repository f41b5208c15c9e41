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
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
)

// publishModel runs the publish step of a completed job with spec.output.model: it creates the
// publish pod (builder.PublishPod) and, once the pod has finished, records status.model from its
// termination message, or why it failed, in the ModelPublished condition. The job's Completed
// result is never changed by it.
func (r *Reconciler) publishModel(ctx context.Context, job *convoy.TrainingJob) error {
	if !publishing(job, &job.Status) {
		return nil // nothing to publish, published, or failed for good
	}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: builder.PublishPodName(job)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return r.startPublishing(ctx, job)
	case err != nil:
		return err
	case !metav1.IsControlledBy(pod, job):
		return r.publishFailed(ctx, job, publishPodTaken(pod.Name))
	}
	msg := terminationMessage(pod)
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		var res publish.Result
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Digest == "" {
			return r.publishFailed(ctx, job, fmt.Sprintf("pod %s succeeded without reporting the digest it pushed (termination message %q)", pod.Name, msg))
		}
		st := *job.Status.DeepCopy()
		st.Model = &convoy.ModelStatus{Reference: res.Reference, Digest: res.Digest, Checkpoint: job.Status.Checkpoint.Latest}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: convoy.ConditionModelPublished, Status: metav1.ConditionTrue,
			Reason: convoy.ReasonModelPublished, Message: fmt.Sprintf("pushed checkpoint %s to %s as %s", st.Model.Checkpoint, res.Reference, res.Digest),
			ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now())})
		return ignoreConflict(r.writeStatus(ctx, job, st))
	case corev1.PodFailed:
		if msg == "" {
			msg = "its container ended without a message; see kubectl logs " + pod.Name
		}
		return r.publishFailed(ctx, job, fmt.Sprintf("pod %s failed: %s", pod.Name, msg))
	}
	return nil
}

func (r *Reconciler) startPublishing(ctx context.Context, job *convoy.TrainingJob) error {
	pod, err := builder.PublishPod(job, r.Options)
	if err != nil {
		return r.publishFailed(ctx, job, err.Error())
	}
	switch err := r.Client.Create(ctx, pod); {
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// A ResourceQuota, Pod Security admission or a webhook said no.
		return r.publishFailed(ctx, job, fmt.Sprintf("the API server did not create pod %s: %v", pod.Name, err))
	case apierrors.IsAlreadyExists(err):
		// Ours, not in the cache yet, or someone else's, which is never used.
		var conflict *childConflict
		if err := r.ownsTaken(ctx, job, pod); errors.As(err, &conflict) {
			return r.publishFailed(ctx, job, publishPodTaken(pod.Name))
		} else if err != nil {
			return err
		}
	case err != nil:
		return err
	}
	st := *job.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: convoy.ConditionModelPublished, Status: metav1.ConditionFalse,
		Reason: convoy.ReasonPublishing, Message: fmt.Sprintf("pod %s pushes checkpoint %s to %s", pod.Name, job.Status.Checkpoint.Latest, job.ModelImage()),
		ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now())})
	return ignoreConflict(r.writeStatus(ctx, job, st))
}

// publishPodTaken says that the publish pod's name is taken by a pod that is not the job's.
func publishPodTaken(name string) string {
	return fmt.Sprintf("pod %s, which the job's publish step needs, is not the job's: delete it or rename the job", name)
}

// publishFailed records why the model was not published, with a Warning event.
func (r *Reconciler) publishFailed(ctx context.Context, job *convoy.TrainingJob, why string) error {
	st := *job.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: convoy.ConditionModelPublished, Status: metav1.ConditionFalse,
		Reason: convoy.ReasonPublishFailed, Message: truncate("the model was not published to " + job.ModelImage() + ": " + why),
		ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now())})
	if err := r.writeStatus(ctx, job, st); err != nil {
		return ignoreConflict(err)
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, convoy.ReasonPublishFailed, "Publish", "%s", meta.FindStatusCondition(st.Conditions, convoy.ConditionModelPublished).Message)
	return nil
}

// terminationMessage is the publish container's termination message.
func terminationMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == builder.PublishContainerName && c.State.Terminated != nil {
			return c.State.Terminated.Message
		}
	}
	return ""
}

// ignoreConflict drops a write conflict: the newer version's event reconciles the job again.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

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

package queue

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"
	utilpod "sigs.k8s.io/kueue/pkg/util/pod"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// GVK is the TrainingJob's kind, the owner kind of its Workload.
var GVK = convoy.GroupVersion.WithKind("TrainingJob")

// jobOwner is the controller reference of a Workload a TrainingJob controls; nil for another
// kind's.
func jobOwner(wl *kueue.Workload) *metav1.OwnerReference {
	if owner := metav1.GetControllerOf(wl); owner != nil && owner.Kind == GVK.Kind && owner.APIVersion == GVK.GroupVersion().String() {
		return owner
	}
	return nil
}

// ExternalFramework is how Kueue's configuration names TrainingJob in
// integrations.externalFrameworks: Kind.version.group.
const ExternalFramework = "TrainingJob.v1alpha1.convoy.dev"

// Job is a TrainingJob as Kueue's jobframework sees it.
//
// It does not implement JobWithReclaimablePods: the operator restarts the whole gang, succeeded
// workers included, after a failure, so a finished worker's quota may still be needed.
type Job convoy.TrainingJob

var (
	_ jobframework.GenericJob           = (*Job)(nil)
	_ jobframework.JobWithPriorityClass = (*Job)(nil)
	_ jobframework.TopLevelJob          = (*Job)(nil)
	_ jobframework.JobWithManagedBy     = (*Job)(nil)
	// An elastic job (spec.elastic) resizes through Kueue's workload slices: a grow is a new
	// Workload, named apart by the job's grows (AnnotationElasticGrows), that replaces the running
	// one once Kueue admits it; a shrink lowers the running Workload's worker count.
	_ jobframework.ElasticWorkloadNameProvider = (*Job)(nil)
)

func fromObject(o runtime.Object) *Job { return (*Job)(o.(*convoy.TrainingJob)) }

func (j *Job) trainingJob() *convoy.TrainingJob { return (*convoy.TrainingJob)(j) }

// Object returns the TrainingJob.
func (j *Job) Object() client.Object { return j.trainingJob() }

// GVK returns the TrainingJob's kind.
func (j *Job) GVK() schema.GroupVersionKind { return GVK }

// IsTopLevel is true: a TrainingJob owns its Workload whatever owns the TrainingJob.
func (j *Job) IsTopLevel() bool { return true }

// IsSuspended reports spec.suspend.
func (j *Job) IsSuspended() bool { return j.trainingJob().IsSuspended() }

// Suspend sets spec.suspend; the operator then deletes the whole gang.
func (j *Job) Suspend() { j.Spec.Suspend = ptr.To(true) }

// CanDefaultManagedBy is true while Convoy's operator would run the job: spec.managedBy is empty
// or names it.
func (j *Job) CanDefaultManagedBy() bool { return !j.trainingJob().ManagedElsewhere() }

// ManagedBy returns spec.managedBy.
func (j *Job) ManagedBy() *string { return j.Spec.ManagedBy }

// SetManagedBy sets spec.managedBy.
func (j *Job) SetManagedBy(managedBy *string) { j.Spec.ManagedBy = managedBy }

// PriorityClass is the PriorityClass named by spec.scheduling.priorityClassName. Kueue prefers the
// WorkloadPriorityClass of the kueue.x-k8s.io/priority-class label when the job has one.
func (j *Job) PriorityClass() string { return j.trainingJob().PriorityClassName() }

// IsActive reports whether any pod of the gang still runs or waits to. Kueue keeps the quota of an
// evicted job until this is false, so a preempted gang frees its GPUs only once every pod is gone.
func (j *Job) IsActive() bool {
	return j.Status.Workers.Active+j.Status.Workers.Pending > 0
}

// PodsReady reports whether every pod of the gang runs (the Running condition).
func (j *Job) PodsReady(context.Context) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionRunning)
}

// Finished reports the Completed or Failed condition.
func (j *Job) Finished(context.Context) (message string, success, finished bool) {
	for _, c := range []struct {
		condition string
		success   bool
	}{{convoy.ConditionCompleted, true}, {convoy.ConditionFailed, false}} {
		if cond := meta.FindStatusCondition(j.Status.Conditions, c.condition); cond != nil && cond.Status == metav1.ConditionTrue {
			return cond.Message, c.success, true
		}
	}
	return "", true, false
}

// roleOrder orders the pod sets: the workers, which hold the GPUs, first.
var roleOrder = []mlframework.Role{mlframework.RoleWorker, mlframework.RolePS, mlframework.RoleScheduler}

// PodSets returns one PodSet per role of the gang: worker, then ps and scheduler where the
// framework has them.
func (j *Job) PodSets(context.Context) ([]kueue.PodSet, error) {
	job := j.trainingJob()
	plugin, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		return nil, err
	}
	var sets []kueue.PodSet
	index := map[mlframework.Role]int{}
	for _, r := range plugin.Replicas(job) {
		if i, ok := index[r.Role]; ok {
			sets[i].Count++
			continue
		}
		index[r.Role] = len(sets)
		sets = append(sets, kueue.PodSet{
			Name:     kueue.PodSetReference(r.Role),
			Count:    1,
			Template: podTemplate(job, r, plugin),
		})
	}
	slices.SortStableFunc(sets, func(a, b kueue.PodSet) int {
		return slices.Index(roleOrder, mlframework.Role(a.Name)) - slices.Index(roleOrder, mlframework.Role(b.Name))
	})
	// With minWorkers, Kueue may admit fewer workers than asked (partial admission). MinCount is
	// set whenever minWorkers is, also once numWorkers shows the count admitted: Kueue compares it
	// with the Workload's.
	for i := range sets {
		if sets[i].Name == kueue.PodSetReference(mlframework.RoleWorker) && job.Spec.MinWorkers != nil {
			sets[i].MinCount = ptr.To(min(*job.Spec.MinWorkers, sets[i].Count))
		}
	}
	return sets, nil
}

// podTemplate is the pod of the role's first replica as the operator builds it, reduced to what
// Kueue admits on: requests, node constraints, tolerations and priority, and to what the placement
// admission check plans the gang with: its pod-group label and topology annotations (Kueue does
// not compare a template's labels and annotations). Everything that changes
// while the job lives (the checkpoint to resume from, the restart attempt) is left out: Kueue
// compares containers to tell whether the Workload still matches the job.
func podTemplate(job *convoy.TrainingJob, r mlframework.Replica, plugin mlframework.Plugin) corev1.PodTemplateSpec {
	pod := builder.Pod(job, r, plugin, builder.Options{})
	strip := func(in []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range in {
			out = append(out, corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
		}
		return out
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{convoy.LabelReplicaRole: string(r.Role),
				schedv1alpha1.PodGroupLabel: pod.Labels[schedv1alpha1.PodGroupLabel]},
			Annotations: topologyOf(pod.Annotations),
		},
		Spec: corev1.PodSpec{
			InitContainers:    strip(pod.Spec.InitContainers),
			Containers:        strip(pod.Spec.Containers),
			RestartPolicy:     pod.Spec.RestartPolicy,
			NodeSelector:      pod.Spec.NodeSelector,
			Affinity:          pod.Spec.Affinity,
			Tolerations:       pod.Spec.Tolerations,
			PriorityClassName: pod.Spec.PriorityClassName,
			SchedulerName:     pod.Spec.SchedulerName,
			Overhead:          pod.Spec.Overhead,
			// Kueue counts the devices of the claim templates (deviceClassMappings).
			ResourceClaims: pod.Spec.ResourceClaims,
		},
	}
}

// topologyOf keeps the topology annotations of a pod's; nil when it has none.
func topologyOf(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{convoy.AnnotationTopologyLevel, convoy.AnnotationTopologyMode} {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// RunWithPodSetsInfo starts the admitted job: it adds the admitted flavors' node labels and
// tolerations to spec.scheduling, which the operator copies into every pod, and clears
// spec.suspend. spec.scheduling applies to every role, so roles admitted to flavors whose node
// labels disagree cannot run together; Kueue then finishes the Workload with the reason.
func (j *Job) RunWithPodSetsInfo(ctx context.Context, infos []podset.PodSetInfo) error {
	sets, err := j.PodSets(ctx)
	if err != nil {
		return err
	}
	if len(infos) != len(sets) {
		return podset.BadPodSetsInfoLenError(len(sets), len(infos))
	}
	s := j.scheduling()
	merged := podset.PodSetInfo{NodeSelector: maps.Clone(s.NodeSelector), Tolerations: slices.Clone(s.Tolerations)}
	for _, info := range infos {
		if err := merged.Merge(podset.PodSetInfo{NodeSelector: info.NodeSelector, Tolerations: info.Tolerations}); err != nil {
			return fmt.Errorf("pod set %s was admitted to flavors whose node labels conflict with the other roles' (spec.scheduling applies to every role): %w", info.Name, err)
		}
	}
	s.NodeSelector, s.Tolerations = merged.NodeSelector, merged.Tolerations
	switch c := workersOf(infos); {
	case j.Spec.Elastic != nil && c > 0:
		// An elastic job keeps numWorkers as its most; the annotations are the size admitted: the
		// one it resizes from, and the one it started at, which a grow leaves as it is (Kueue runs
		// this only to start a suspended job, never for a grow's slice). Its pods carry the
		// Workload slice's name, by which Kueue finds them to start them.
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(c)))
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, convoy.AnnotationElasticAdmitted, strconv.Itoa(int(c)))
		if name := infos[0].Annotations[kueue.WorkloadSliceNameAnnotation]; name != "" && jobframework.WorkloadSliceEnabled(j) {
			metav1.SetMetaDataAnnotation(&j.ObjectMeta, kueue.WorkloadSliceNameAnnotation, name)
		}
	case c > 0 && c < j.Spec.NumWorkers && j.Spec.MinWorkers != nil && c >= *j.Spec.MinWorkers:
		// Partially admitted: the job runs with the workers admitted.
		j.Spec.NumWorkers = c
	}
	j.Spec.Suspend = ptr.To(false)
	return nil
}

// GetWorkloadNameExtraPart names each Workload slice of an elastic job apart: by the job's
// generation and the number of times it grew.
func (j *Job) GetWorkloadNameExtraPart() string {
	return strconv.FormatInt(j.Generation, 10) + "_" + cmp.Or(j.Annotations[convoy.AnnotationElasticGrows], "0")
}

// workersOf is the worker count of infos, 0 when they have no worker pod set.
func workersOf(infos []podset.PodSetInfo) int32 {
	for _, info := range infos {
		if info.Name == kueue.PodSetReference(mlframework.RoleWorker) {
			return info.Count
		}
	}
	return 0
}

// RestorePodSetsInfo puts back the node selector and tolerations the job had before admission,
// which every PodSet of its Workload recorded. It reports whether anything changed.
func (j *Job) RestorePodSetsInfo(infos []podset.PodSetInfo) bool {
	if len(infos) == 0 {
		return false
	}
	nodeSelector, tolerations := infos[0].NodeSelector, infos[0].Tolerations
	s := j.Spec.Scheduling
	if s == nil {
		if len(nodeSelector) == 0 && len(tolerations) == 0 {
			return false
		}
		s = j.scheduling()
	}
	changed := false
	if !maps.Equal(s.NodeSelector, nodeSelector) {
		s.NodeSelector = maps.Clone(nodeSelector)
		changed = true
	}
	if !equality.Semantic.DeepEqual(s.Tolerations, tolerations) && (len(s.Tolerations) > 0 || len(tolerations) > 0) {
		s.Tolerations = slices.Clone(tolerations)
		changed = true
	}
	// A job that may be partially admitted asks for its workers again (as Kueue's batch Job
	// restores its parallelism); an elastic job asks for spec.numWorkers.
	if _, ok := j.Annotations[convoy.AnnotationElasticWorkers]; ok {
		delete(j.Annotations, convoy.AnnotationElasticWorkers)
		delete(j.Annotations, convoy.AnnotationElasticAdmitted)
		changed = true
	} else if c := workersOf(infos); j.Spec.MinWorkers != nil && c > 0 && c != j.Spec.NumWorkers {
		j.Spec.NumWorkers = c
		changed = true
	}
	return changed
}

func (j *Job) scheduling() *convoy.SchedulingSpec {
	if j.Spec.Scheduling == nil {
		j.Spec.Scheduling = &convoy.SchedulingSpec{}
	}
	return j.Spec.Scheduling
}

// changedForKueue reports whether an update of a TrainingJob changes anything Kueue's job
// reconciler reads: the spec, the metadata, or the part of the status behind IsActive, PodsReady
// and Finished. The operator rewrites the status for much else (progress, messages), and every
// reconcile it saves is one less race to create the job's Workload twice. The pods an elastic job
// adds wake the reconciler themselves (elasticGated), not the status that counts them.
func changedForKueue(oldJob, newJob *convoy.TrainingJob) bool {
	if oldJob.Generation != newJob.Generation || !newJob.DeletionTimestamp.IsZero() ||
		!maps.Equal(oldJob.Labels, newJob.Labels) || !maps.Equal(oldJob.Annotations, newJob.Annotations) ||
		!slices.Equal(oldJob.Finalizers, newJob.Finalizers) || !equality.Semantic.DeepEqual(oldJob.OwnerReferences, newJob.OwnerReferences) {
		return true
	}
	o, n := (*Job)(oldJob), (*Job)(newJob)
	_, oldSuccess, oldFinished := o.Finished(context.Background())
	_, newSuccess, newFinished := n.Finished(context.Background())
	return o.IsActive() != n.IsActive() || o.PodsReady(context.Background()) != n.PodsReady(context.Background()) ||
		oldFinished != newFinished || oldSuccess != newSuccess
}

// elasticGated reports whether obj is a pod held at Kueue's scheduling gate for the Workload slice
// of an elastic job, which Kueue's job reconciler removes once the slice is admitted.
func elasticGated(obj client.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	return ok && utilpod.HasGate(pod, kueue.ElasticJobSchedulingGate)
}

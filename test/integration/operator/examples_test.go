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

package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// defaultStorageClass is the cluster's default StorageClass in these tests; nothing provisions it,
// so claims of it stay Pending, which kwok's pods do not mind.
const defaultStorageClass = "standard"

// applyExample creates examples/design/<file> in the test's namespace as kubectl apply would
// send it, after edit (if any) changed its spec, and returns the job's name.
func (e *env) applyExample(file string, edit ...func(spec map[string]any)) string {
	e.t.Helper()
	return e.applyExampleAs(file, "", edit...)
}

// applyExampleAs is applyExample with the job named name, unless empty.
func (e *env) applyExampleAs(file, name string, edit ...func(spec map[string]any)) string {
	e.t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		e.t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "design", file))
	if err != nil {
		e.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		e.t.Fatalf("examples/design/%s: %v", file, err)
	}
	spec := u.Object["spec"].(map[string]any)
	for _, f := range edit {
		f(spec)
	}
	if name != "" {
		u.SetName(name)
	}
	u.SetNamespace(e.ns)
	if err := e.k.Create(e.t.Context(), u); err != nil {
		e.t.Fatalf("applying examples/design/%s: %v", file, err)
	}
	return u.GetName()
}

// runToCompletion places the job's n pods, waits until it runs, ends every pod with exit code 0
// and waits until the job is Completed.
func (e *env) runToCompletion(name string, n int) *convoy.TrainingJob {
	e.t.Helper()
	for pod := range e.startGang(name, n, 0) {
		e.finishPod(pod, 0)
	}
	job := e.waitState(name, convoy.StateCompleted)
	e.wantCondition(job, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded)
	return job
}

func (e *env) configMap(name string) *corev1.ConfigMap {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, cm); err != nil {
		e.t.Fatal(err)
	}
	return cm
}

// checkpointMounts are the pod's checkpoints volume mounts and the claim they mount.
func checkpointMounts(pod *corev1.Pod) ([]corev1.VolumeMount, string) {
	var mount []corev1.VolumeMount
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "checkpoints" {
			mount = append(mount, m)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "checkpoints" && v.PersistentVolumeClaim != nil {
			return mount, v.PersistentVolumeClaim.ClaimName
		}
	}
	return mount, ""
}

func TestDesignExampleMinimal(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	name := e.applyExample("minimal.yaml")
	pods := e.waitPods(name, 1, 0)
	pod := pods[name+"-worker-0"]
	if pod == nil || util.EnvOf(pod, "MODEL") != "resnet18" || util.EnvOf(pod, "DATASET") != "mnist" || util.EnvOf(pod, "WORLD_SIZE") != "1" {
		t.Fatalf("pods %v: want %s-worker-0 with MODEL resnet18, DATASET mnist, WORLD_SIZE 1", pods, name)
	}
	if got := pod.Spec.Containers[0].Resources.Limits[convoy.ResourceGPU]; got.Value() != 1 {
		t.Errorf("GPU limit %s, want the default 1", got.String())
	}
	e.runToCompletion(name, 1)
}

func TestDesignExampleMixedPrecision(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	name := e.applyExample("mixed-precision.yaml")
	pods := e.waitPods(name, 2, 0)
	cm := e.configMap(name + "-config")
	if cm.Data["MIXED_PRECISION"] != "bf16" || !strings.Contains(cm.Data["hyperparameters.json"], `"mixedPrecision":"bf16"`) {
		t.Errorf("ConfigMap %s: MIXED_PRECISION %q, hyperparameters.json %s; want bf16 in both", cm.Name, cm.Data["MIXED_PRECISION"], cm.Data["hyperparameters.json"])
	}
	for _, pod := range pods {
		if !readsConfigKey(pod, "MIXED_PRECISION", name+"-config") {
			t.Errorf("pod %s does not get MIXED_PRECISION from the ConfigMap: %v", pod.Name, pod.Spec.Containers[0].Env)
		}
	}
	e.runToCompletion(name, 2)
}

func readsConfigKey(pod *corev1.Pod, key, configMap string) bool {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == key && v.ValueFrom != nil && v.ValueFrom.ConfigMapKeyRef != nil {
			return v.ValueFrom.ConfigMapKeyRef.Name == configMap && v.ValueFrom.ConfigMapKeyRef.Key == key
		}
	}
	return false
}

func TestDesignExampleDistributed(t *testing.T) {
	e := newEnv(t)
	e.ensureDefaultStorageClass()
	e.startOperator()
	name := e.applyExample("distributed.yaml")
	pods := e.waitPods(name, 4, 0)
	for i := range 4 {
		pod := pods[fmt.Sprintf("%s-worker-%d", name, i)]
		if pod == nil {
			t.Fatalf("no worker %d among %v", i, pods)
		}
		if util.EnvOf(pod, "PET_NNODES") != "4" || util.EnvOf(pod, "PET_NPROC_PER_NODE") != "8" || util.EnvOf(pod, "NODE_RANK") != fmt.Sprint(i) ||
			util.EnvOf(pod, "MASTER_ADDR") != name+"-worker-0."+name+"."+e.ns+".svc" || util.EnvOf(pod, "NCCL_IB_DISABLE") != "0" {
			t.Errorf("pod %s torchrun and NCCL environment: %v", pod.Name, pod.Spec.Containers[0].Env)
		}
		if _, claim := checkpointMounts(pod); claim != name+"-checkpoints" {
			t.Errorf("pod %s mounts claim %q, want %s-checkpoints", pod.Name, claim, name)
		}
	}
	if pvc := e.claim(name + "-checkpoints"); len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim access modes %v, want ReadWriteMany for a gang on several nodes", pvc.Spec.AccessModes)
	}
	e.runToCompletion(name, 4)
}

func TestDesignExampleResume(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	name := e.applyExample("resume.yaml")
	for _, pod := range e.waitPods(name, 2, 0) {
		if got := util.EnvOf(pod, "CONVOY_RESUME_FROM"); got != "s3://checkpoints/team-a/llama-pretrain/epoch-20" {
			t.Errorf("pod %s CONVOY_RESUME_FROM = %q, want spec.checkpoint.resumeFrom", pod.Name, got)
		}
		if got := util.EnvOf(pod, "CONVOY_CHECKPOINT_URI"); got != "s3://checkpoints/team-a/llama-continued/attempt-0" {
			t.Errorf("pod %s CONVOY_CHECKPOINT_URI = %q", pod.Name, got)
		}
	}
	e.runToCompletion(name, 2)
}

// TestDesignExampleCheckpointWithoutStorage: checkpointing without storage gets a claim of the
// job's own, mounted where CONVOY_CHECKPOINT_URI points. Under the default reclaimPolicy Retain
// the claim outlives the job, and the job applied again uses it again; under Delete it goes with
// the job.
func TestDesignExampleCheckpointWithoutStorage(t *testing.T) {
	e := newEnv(t)
	e.ensureDefaultStorageClass()
	e.startOperator()
	name := e.applyExample("checkpoint.yaml")
	deleting := e.applyExampleAs("checkpoint.yaml", "bert-deleting", func(spec map[string]any) {
		spec["checkpoint"].(map[string]any)["storage"] = map[string]any{"reclaimPolicy": "Delete"}
	})
	claimName := name + "-checkpoints"
	for _, pod := range e.waitPods(name, 2, 0) {
		mounts, claim := checkpointMounts(pod)
		want := []corev1.VolumeMount{{Name: "checkpoints", MountPath: "/checkpoints", ReadOnly: true}, {Name: "checkpoints",
			MountPath: "/checkpoints/" + e.ns + "/" + name + "/attempt-0", SubPath: e.ns + "/" + name + "/attempt-0"}}
		if claim != claimName || !equality.Semantic.DeepEqual(mounts, want) {
			t.Errorf("pod %s mounts claim %q as %+v, want %s read-only at /checkpoints, its attempt-0 read-write", pod.Name, claim, mounts, claimName)
		}
		if util.EnvOf(pod, "CONVOY_CHECKPOINT_ROOT") != "/checkpoints/"+e.ns+"/"+name || util.EnvOf(pod, "CONVOY_CHECKPOINT_FREQUENCY") != "5" ||
			util.EnvOf(pod, "CONVOY_CHECKPOINT_INTERVAL_SECONDS") != "1800" {
			t.Errorf("pod %s checkpoint environment: %v", pod.Name, pod.Spec.Containers[0].Env)
		}
	}
	pvc := e.claim(claimName)
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("10Gi")) != 0 ||
		pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != defaultStorageClass ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim spec %+v: want 10Gi of the default StorageClass %s, ReadWriteMany", pvc.Spec, defaultStorageClass)
	}
	if pvc.Labels[convoy.LabelJobName] != name || len(pvc.OwnerReferences) != 0 {
		t.Errorf("claim labels %v, owners %v: want the job's label and no owner (Retain)", pvc.Labels, pvc.OwnerReferences)
	}
	if pvc := e.claim(deleting + "-checkpoints"); !metav1.IsControlledBy(pvc, e.job(deleting)) {
		t.Errorf("claim of %s (reclaimPolicy Delete) owners %v, want the job as controller", deleting, pvc.OwnerReferences)
	}
	jobs := []*convoy.TrainingJob{e.runToCompletion(name, 2), e.runToCompletion(deleting, 2)}

	e.deleteJobsAndWaitForChildren(jobs...)
	if pvc := e.claim(claimName); pvc.DeletionTimestamp != nil || len(pvc.OwnerReferences) != 0 {
		t.Errorf("the retained claim is deleted or owned after its job was: deletion %v, owners %v", pvc.DeletionTimestamp, pvc.OwnerReferences)
	}
	pvc = &corev1.PersistentVolumeClaim{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: deleting + "-checkpoints"}, pvc); !apierrors.IsNotFound(err) && (err != nil || pvc.DeletionTimestamp == nil) {
		t.Errorf("the claim of %s (reclaimPolicy Delete) is still there after the job was deleted: %v", deleting, err)
	}

	// Applied again, the job mounts the claim it kept, with its checkpoints.
	e.applyExample("checkpoint.yaml")
	for _, pod := range e.waitPods(name, 2, 0) {
		if _, claim := checkpointMounts(pod); claim != claimName {
			t.Errorf("pod %s mounts claim %q, want the retained %s", pod.Name, claim, claimName)
		}
	}
	if pvc := e.claim(claimName); pvc.DeletionTimestamp != nil || len(pvc.OwnerReferences) != 0 {
		t.Errorf("the retained claim: deletion %v, owners %v", pvc.DeletionTimestamp, pvc.OwnerReferences)
	}
}

// A fresh claim under Delete: the class, size and access mode asked for, and the job as its controller.
func TestCheckpointClaimAsAsked(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	name := e.applyExample("checkpoint.yaml", func(spec map[string]any) {
		spec["checkpoint"].(map[string]any)["storage"] = map[string]any{"reclaimPolicy": "Delete", "storageClassName": "fast",
			"size": "1Ti", "accessModes": []any{"ReadWriteOnce"}}
	})
	e.waitPods(name, 2, 0)
	pvc := e.claim(name + "-checkpoints")
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Ti")) != 0 ||
		pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || !metav1.IsControlledBy(pvc, e.job(name)) {
		t.Errorf("claim %+v, owners %v: want 1Ti of class fast, ReadWriteOnce, controlled by the job", pvc.Spec, pvc.OwnerReferences)
	}
	// Switching to Retain lets the claim go free of the job.
	e.patchSpec(name, `{"spec": {"checkpoint": {"storage": {"reclaimPolicy": "Retain"}}}}`)
	e.eventually("the claim without owner", func() (bool, string) {
		pvc := e.claim(name + "-checkpoints")
		return len(pvc.OwnerReferences) == 0, fmt.Sprint(pvc.OwnerReferences)
	})
}

// TestSharedClaimGetsSubPath: jobs naming one claim each mount only their own directory of it.
func TestSharedClaimGetsSubPath(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	shared := func(spec map[string]any) {
		spec["checkpoint"].(map[string]any)["storage"] = map[string]any{"type": "pvc", "claimName": "team-checkpoints"}
	}
	a := e.applyExample("checkpoint.yaml", shared)
	b := e.applyExample("minimal.yaml", func(spec map[string]any) {
		spec["checkpoint"] = map[string]any{"enabled": true}
		shared(spec)
	})
	for job, n := range map[string]int{a: 2, b: 1} {
		for _, pod := range e.waitPods(job, n, 0) {
			mounts, claim := checkpointMounts(pod)
			dir := e.ns + "/" + job
			want := []corev1.VolumeMount{{Name: "checkpoints", MountPath: "/checkpoints/" + dir, SubPath: dir, ReadOnly: true},
				{Name: "checkpoints", MountPath: "/checkpoints/" + dir + "/attempt-0", SubPath: dir + "/attempt-0"}}
			if claim != "team-checkpoints" || !equality.Semantic.DeepEqual(mounts, want) || util.EnvOf(pod, "CONVOY_CHECKPOINT_ROOT") != want[0].MountPath {
				t.Errorf("pod %s mounts claim %q as %+v with CONVOY_CHECKPOINT_ROOT %q, want team-checkpoints as %+v", pod.Name, claim, mounts, util.EnvOf(pod, "CONVOY_CHECKPOINT_ROOT"), want)
			}
		}
	}
	for _, claim := range []string{a + "-checkpoints", b + "-checkpoints"} {
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: claim}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
			t.Errorf("claim %s: %v, want none for a job that names its claim", claim, err)
		}
	}
}

// TestCheckpointClaimSquatterIsNeverUsed: a claim <job>-checkpoints that is not the job's is
// never mounted; the job says so in ChildConflict and creates no pods until it is gone.
func TestCheckpointClaimSquatterIsNeverUsed(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	squatter := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "bert-finetune-checkpoints"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	e.create(squatter)
	name := e.applyExample("checkpoint.yaml")
	taken := "PersistentVolumeClaim " + e.ns + "/" + squatter.Name
	e.eventually("ChildConflict naming the claim", func() (bool, string) {
		c := meta.FindStatusCondition(e.job(name).Status.Conditions, convoy.ConditionChildConflict)
		if c == nil {
			return false, "none"
		}
		return c.Status == metav1.ConditionTrue && c.Reason == convoy.ReasonNameTaken && strings.Contains(c.Message, taken), c.Message
	})
	if pods := e.pods(name); len(pods) != 0 {
		t.Errorf("the job created pods %v that would mount a claim that is not its own", pods)
	}
	if pvc := e.claim(squatter.Name); len(pvc.OwnerReferences) != 0 || len(pvc.Labels) != 0 {
		t.Errorf("the squatter was adopted: owners %v, labels %v", pvc.OwnerReferences, pvc.Labels)
	}
	if err := e.k.Delete(t.Context(), squatter); err != nil {
		t.Fatal(err)
	}
	e.eventually("the job's own claim", func() (bool, string) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: squatter.Name}, pvc)
		return err == nil && pvc.Labels[convoy.LabelJobName] == name, fmt.Sprint(err, pvc.Labels)
	})
	e.waitPods(name, 2, 0)
}

func (e *env) claim(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	e.eventually("claim "+name, func() (bool, string) {
		err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, pvc)
		return err == nil, fmt.Sprint(err)
	})
	return pvc
}

func (e *env) patchSpec(name, patch string) {
	e.t.Helper()
	job := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.k.Patch(e.t.Context(), job, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		e.t.Fatalf("patching %s with %s: %v", name, patch, err)
	}
}

// deleteJobsAndWaitForChildren deletes the jobs as kubectl delete does and waits until the garbage
// collector has taken their ConfigMaps. kube-controller-manager's garbage collector learns of a
// CRD's kinds only every 30 s, so this waits longer than other steps.
func (e *env) deleteJobsAndWaitForChildren(jobs ...*convoy.TrainingJob) {
	e.t.Helper()
	for _, job := range jobs {
		if err := e.k.Delete(e.t.Context(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			e.t.Fatal(err)
		}
	}
	var last string
	err := wait.PollUntilContextTimeout(e.t.Context(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, job := range jobs {
			err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: job.Name + "-config"}, &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				last = fmt.Sprintf("ConfigMap %s-config: %v", job.Name, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for the garbage collector to take the deleted jobs' ConfigMaps: %v; last: %s", err, last)
	}
}

// ensureDefaultStorageClass makes standard the cluster's default StorageClass, which the API
// server writes into claims that name none.
func (e *env) ensureDefaultStorageClass() {
	e.t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: defaultStorageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "example.com/none",
	}
	if err := e.k.Create(e.t.Context(), sc); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

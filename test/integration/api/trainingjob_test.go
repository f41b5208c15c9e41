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

package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// namespace creates the test's namespace name (framework.Unique) and returns its name.
func namespace(t *testing.T, c *framework.Cluster, name string) string {
	t.Helper()
	name = framework.Unique(t, name)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// fromYAML parses a manifest as the API server receives it from kubectl, so plain YAML numbers
// (learningRate: 0.00005) reach the schema unchanged.
func fromYAML(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v\n%s", err, manifest)
	}
	return u
}

// createSample creates deploy/samples/<file> in namespace ns, as a user would apply it, and returns
// the TrainingJob the API server stored.
func createSample(t *testing.T, c *framework.Cluster, file, ns string) *v1alpha1.TrainingJob {
	t.Helper()
	ctx := context.Background()
	root, _ := framework.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "deploy", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	u := fromYAML(t, string(data))
	u.SetNamespace(ns)
	if err := c.Client.Create(ctx, u); err != nil {
		t.Fatalf("the sample %s was rejected: %v", file, err)
	}
	job := &v1alpha1.TrainingJob{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestSampleIsAcceptedAndDefaulted(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c, "api-sample")
	job := createSample(t, c, "pytorch-llama.yaml", ns)
	if got := *job.Spec.Hyperparameters.LearningRate; got != 0.00005 {
		t.Errorf("learningRate = %v, want 0.00005 kept exactly", got)
	}
	if job.Spec.Scheduling.SchedulerName != "convoy-scheduler" || job.Spec.Scheduling.Topology.Mode != v1alpha1.TopologyRequired {
		t.Errorf("scheduling defaults: schedulerName %q topology.mode %q, want convoy-scheduler and required",
			job.Spec.Scheduling.SchedulerName, job.Spec.Scheduling.Topology.Mode)
	}
	if job.Spec.Networking.MasterPort != 29500 || job.Spec.Monitoring.MetricsPort != 9090 {
		t.Errorf("ports: masterPort %d metricsPort %d, want 29500 and 9090", job.Spec.Networking.MasterPort, job.Spec.Monitoring.MetricsPort)
	}
	if job.Spec.NumParameterServers != 0 || job.IsSuspended() {
		t.Errorf("numParameterServers %d suspend %v, want 0 and false", job.Spec.NumParameterServers, job.IsSuspended())
	}

	mj := createSample(t, c, "pytorch-minimal.yaml", ns)
	if mj.Spec.Framework != v1alpha1.FrameworkPyTorch || mj.GPUsPerWorker() != 1 {
		t.Errorf("minimal job defaults: framework %q gpusPerWorker %d, want pytorch and 1", mj.Spec.Framework, mj.GPUsPerWorker())
	}
}

// TestGPUsInResourcesAreAccepted: a manifest written for the seed design, which asks GPUs in
// spec.resources as a pod would (beside gpusPerWorker, or alone), is accepted, and its workers
// request that many GPUs.
func TestGPUsInResourcesAreAccepted(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-gpu-resources")
	plugin, err := mlframework.For(v1alpha1.FrameworkPyTorch)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		spec string
		want int32
	}{
		"both-agree":     {spec: `{"gpusPerWorker": 4, "resources": {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}`, want: 4},
		"resources-only": {spec: `{"resources": {"limits": {"nvidia.com/gpu": 8}}}`, want: 8},
		"requests-only":  {spec: `{"resources": {"requests": {"nvidia.com/gpu": "2"}}}`, want: 2},
		"neither":        {spec: `{}`, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			u := fromYAML(t, strings.NewReplacer("NAME", name, "api-invalid", ns).Replace(validSpec))
			var patch map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &patch); err != nil {
				t.Fatal(err)
			}
			for k, v := range patch {
				u.Object["spec"].(map[string]any)[k] = v
			}
			if err := c.Client.Create(ctx, u); err != nil {
				t.Fatalf("create: %v", err)
			}
			var job v1alpha1.TrainingJob
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), &job); err != nil {
				t.Fatal(err)
			}
			pod := builder.Pod(&job, mlframework.Replica{Role: mlframework.RoleWorker}, plugin, builder.Options{})
			got := pod.Spec.Containers[0].Resources.Limits[v1alpha1.ResourceGPU]
			if job.GPUsPerWorker() != tc.want || got.Value() != int64(tc.want) {
				t.Errorf("gpusPerWorker %d, worker limit %s; want %d", job.GPUsPerWorker(), got.String(), tc.want)
			}
		})
	}
}

// TestJAXSampleIsAccepted: the JAX sample, whose script the frameworks test runs, is a valid
// TrainingJob with its inline script kept as written.
func TestJAXSampleIsAccepted(t *testing.T) {
	c := cluster(t)
	job := createSample(t, c, "jax.yaml", namespace(t, c, "api-jax"))
	if job.Spec.Framework != v1alpha1.FrameworkJAX || len(job.Spec.Args) != 1 || !strings.Contains(job.Spec.Args[0], `num_processes=int(os.environ["JAX_NUM_PROCESSES"])`) {
		t.Errorf("framework %q, args %q: want jax and the script that passes JAX_NUM_PROCESSES", job.Spec.Framework, job.Spec.Args)
	}
}

const validSpec = `
apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata:
  name: NAME
  namespace: api-invalid
spec:
  model: bert-base
  dataset: s3://corpus/wiki
  numWorkers: 2
`

func TestInvalidSpecsAreRejectedNamingTheField(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	namespace(t, c, "api-invalid")
	cases := map[string]struct {
		spec string // YAML merged over the valid spec's spec
		want string // what the user must read in the error
	}{
		"model missing":                  {spec: `{"model": null}`, want: "spec.model: Required value"},
		"model empty":                    {spec: `{"model": ""}`, want: "spec.model"},
		"dataset missing":                {spec: `{"dataset": null}`, want: "spec.dataset: Required value"},
		"numWorkers missing":             {spec: `{"numWorkers": null}`, want: "spec.numWorkers: Required value"},
		"numWorkers zero":                {spec: `{"numWorkers": 0}`, want: "spec.numWorkers"},
		"numWorkers too many":            {spec: `{"numWorkers": 2048}`, want: "spec.numWorkers"},
		"minWorkers above numWorkers":    {spec: `{"numWorkers": 2, "minWorkers": 3}`, want: "spec.minWorkers: Invalid value: spec.minWorkers must not exceed spec.numWorkers: lower spec.minWorkers, or raise spec.numWorkers"},
		"minWorkers zero":                {spec: `{"minWorkers": 0}`, want: "spec.minWorkers"},
		"elastic without minWorkers":     {spec: `{"elastic": {}}`, want: "spec.elastic: Invalid value: spec.elastic needs spec.minWorkers below spec.numWorkers: the job resizes between the two; set spec.minWorkers lower than spec.numWorkers, or remove spec.elastic"},
		"elastic at one size":            {spec: `{"minWorkers": 2, "elastic": {}}`, want: "spec.elastic needs spec.minWorkers below spec.numWorkers"},
		"elastic tensorflow":             {spec: `{"framework": "tensorflow", "minWorkers": 1, "elastic": {}}`, want: "spec.elastic needs framework pytorch: only torchrun's elastic rendezvous lets workers join and leave a running job"},
		"elastic cooldown too short":     {spec: `{"minWorkers": 1, "elastic": {"resizeCooldownSeconds": 5}}`, want: "spec.elastic.resizeCooldownSeconds: Invalid value: 5: spec.elastic.resizeCooldownSeconds in body should be greater than or equal to 30"},
		"elastic efficiency above 100":   {spec: `{"minWorkers": 1, "elastic": {"minScalingEfficiency": 120}}`, want: "spec.elastic.minScalingEfficiency: Invalid value: 120: spec.elastic.minScalingEfficiency in body should be less than or equal to 100"},
		"unknown framework":              {spec: `{"framework": "caffe"}`, want: `spec.framework: Unsupported value: "caffe"`},
		"negative gpus":                  {spec: `{"gpusPerWorker": -1}`, want: "spec.gpusPerWorker"},
		"too many gpus per worker":       {spec: `{"gpusPerWorker": 17}`, want: "spec.gpusPerWorker"},
		"parameter servers for pytorch":  {spec: `{"numParameterServers": 2}`, want: "spec.numParameterServers is only used by framework tensorflow or mxnet"},
		"mxnet without servers":          {spec: `{"framework": "mxnet"}`, want: "spec.numParameterServers must be at least 1 for framework mxnet"},
		"gpus in resources disagree":     {spec: `{"gpusPerWorker": 4, "resources": {"limits": {"nvidia.com/gpu": "8"}}}`, want: "spec.resources.limits[nvidia.com/gpu] must be a whole number equal to spec.gpusPerWorker: set one of the two, or make them agree"},
		"gpu requests disagree":          {spec: `{"gpusPerWorker": 4, "resources": {"requests": {"nvidia.com/gpu": 2}}}`, want: "spec.resources.requests[nvidia.com/gpu] must be a whole number equal to spec.gpusPerWorker"},
		"fractional gpus in resources":   {spec: `{"resources": {"limits": {"nvidia.com/gpu": "500m"}}}`, want: "spec.resources.limits[nvidia.com/gpu] must be a whole number"},
		"DRA and extended GPUs":          {spec: `{"gpu": {"deviceClassName": "gpu.nvidia.com"}, "resources": {"limits": {"nvidia.com/gpu": "4"}}}`, want: "spec.gpu: Invalid value: spec.gpu asks for the workers' GPUs as DRA devices, so spec.resources must not ask for nvidia.com/gpu too"},
		"DRA GPUs but none per worker":   {spec: `{"gpusPerWorker": 0, "gpu": {"deviceClassName": "gpu.nvidia.com"}}`, want: "spec.gpu asks for DRA GPUs but spec.gpusPerWorker is 0"},
		"DRA device class not a name":    {spec: `{"gpu": {"deviceClassName": "GPU Class"}}`, want: "spec.gpu.deviceClassName must be a DeviceClass name"},
		"DRA product with a quote":       {spec: `{"gpu": {"deviceClassName": "gpu.nvidia.com", "product": "H100\" || true"}}`, want: "spec.gpu.product must be a product name"},
		"gpu requests above limits":      {spec: `{"resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "4"}}}`, want: "spec.resources.requests[nvidia.com/gpu] must equal spec.resources.limits[nvidia.com/gpu]"},
		"zero learning rate":             {spec: `{"hyperparameters": {"learningRate": 0}}`, want: "spec.hyperparameters.learningRate must be greater than 0"},
		"zero budget":                    {spec: `{"budget": 0}`, want: "spec.budget must be greater than 0, an amount in the price list's currency"},
		"negative budget":                {spec: `{"budget": -5}`, want: "spec.budget must be greater than 0"},
		"learning rate as a word":        {spec: `{"hyperparameters": {"learningRate": "fast"}}`, want: "spec.hyperparameters.learningRate"},
		"unknown precision":              {spec: `{"hyperparameters": {"precision": "fp64"}}`, want: `spec.hyperparameters.precision: Unsupported value: "fp64"`},
		"mixed precision as a dtype":     {spec: `{"hyperparameters": {"mixedPrecision": "bf16"}}`, want: "spec.hyperparameters.mixedPrecision in body must be of type boolean"},
		"precision with it off":          {spec: `{"hyperparameters": {"mixedPrecision": false, "precision": "fp16"}}`, want: "spec.hyperparameters.precision is only used with mixed precision: remove it, or set spec.hyperparameters.mixedPrecision to true"},
		"zero epochs":                    {spec: `{"hyperparameters": {"epochs": 0}}`, want: "spec.hyperparameters.epochs"},
		"interval under a minute":        {spec: `{"checkpoint": {"enabled": true, "intervalSeconds": 30}}`, want: "spec.checkpoint.intervalSeconds: Invalid value: 30: spec.checkpoint.intervalSeconds must be between 60 (a checkpoint a minute) and 604800"},
		"s3 without bucket":              {spec: `{"checkpoint": {"enabled": true, "storage": {"type": "s3"}}}`, want: "spec.checkpoint.storage.s3Bucket is required when spec.checkpoint.storage.type is s3"},
		"size of a named claim":          {spec: `{"checkpoint": {"storage": {"type": "pvc", "claimName": "c", "size": "5Gi"}}}`, want: "spec.checkpoint.storage.storageClassName, size, accessModes and reclaimPolicy describe the claim the operator creates: remove them, or remove claimName and use type pvc"},
		"reclaim policy for s3":          {spec: `{"checkpoint": {"storage": {"type": "s3", "s3Bucket": "ckpt", "reclaimPolicy": "Delete"}}}`, want: "spec.checkpoint.storage.storageClassName, size, accessModes and reclaimPolicy describe the claim the operator creates"},
		"unknown reclaim policy":         {spec: `{"checkpoint": {"storage": {"reclaimPolicy": "Recycle"}}}`, want: `spec.checkpoint.storage.reclaimPolicy: Unsupported value: "Recycle"`},
		"zero checkpoint size":           {spec: `{"checkpoint": {"storage": {"size": "0"}}}`, want: "spec.checkpoint.storage.size must be greater than 0, for example 10Gi"},
		"read-only checkpoint claim":     {spec: `{"checkpoint": {"storage": {"accessModes": ["ReadOnlyMany"]}}}`, want: `spec.checkpoint.storage.accessModes[0]: Unsupported value: "ReadOnlyMany"`},
		"prefix climbing out":            {spec: `{"checkpoint": {"storage": {"type": "pvc", "claimName": "c", "prefix": "team/../other"}}}`, want: "spec.checkpoint.storage.prefix must be a relative path without '..' segments"},
		"absolute prefix":                {spec: `{"checkpoint": {"storage": {"type": "pvc", "claimName": "c", "prefix": "/etc"}}}`, want: "spec.checkpoint.storage.prefix must be a relative path without '..' segments"},
		"gcs without bucket":             {spec: `{"checkpoint": {"storage": {"type": "gcs"}}}`, want: "spec.checkpoint.storage.gcsBucket is required when spec.checkpoint.storage.type is gcs"},
		"azure without container":        {spec: `{"checkpoint": {"storage": {"type": "azure"}}}`, want: "spec.checkpoint.storage.azureContainer is required when spec.checkpoint.storage.type is azure"},
		"nfs without export":             {spec: `{"checkpoint": {"storage": {"type": "nfs"}}}`, want: "spec.checkpoint.storage.nfs (server and path) is required"},
		"nfs relative path":              {spec: `{"checkpoint": {"storage": {"type": "nfs", "nfs": {"server": "nas", "path": "ckpt"}}}}`, want: "spec.checkpoint.storage.nfs.path must be an absolute path"},
		"unknown storage":                {spec: `{"checkpoint": {"storage": {"type": "hdfs"}}}`, want: `spec.checkpoint.storage.type: Unsupported value: "hdfs"`},
		"credentials for a pvc":          {spec: `{"checkpoint": {"storage": {"type": "pvc", "claimName": "c", "credentialsSecretRef": {"name": "s"}}}}`, want: "spec.checkpoint.storage.credentialsSecretRef is only used with type s3, gcs or azure"},
		"presigned with a prefix":        {spec: `{"checkpoint": {"storage": {"type": "s3", "s3Bucket": "ckpt", "s3Access": "presigned", "prefix": "team-b"}}}`, want: "spec.checkpoint.storage.s3Access presigned needs type s3, no credentialsSecretRef and no prefix"},
		"presigned with credentials":     {spec: `{"checkpoint": {"storage": {"type": "s3", "s3Bucket": "ckpt", "s3Access": "presigned", "credentialsSecretRef": {"name": "s"}}}}`, want: "spec.checkpoint.storage.s3Access presigned needs type s3"},
		"presigned for gcs":              {spec: `{"checkpoint": {"storage": {"type": "gcs", "gcsBucket": "ckpt", "s3Access": "presigned"}}}`, want: "spec.checkpoint.storage.s3Access presigned needs type s3"},
		"azure presigned with a key":     {spec: `{"checkpoint": {"storage": {"type": "azure", "azureContainer": "ckpt", "azureAccess": "presigned", "credentialsSecretRef": {"name": "s"}}}}`, want: "spec.checkpoint.storage.azureAccess presigned needs type azure, no credentialsSecretRef"},
		"azure presigned, own account":   {spec: `{"checkpoint": {"storage": {"type": "azure", "azureContainer": "ckpt", "azureAccess": "presigned", "azureStorageAccount": "team"}}}`, want: "no azureStorageAccount (the account is the operator's)"},
		"azure presigned for s3":         {spec: `{"checkpoint": {"storage": {"type": "s3", "s3Bucket": "ckpt", "azureAccess": "presigned"}}}`, want: "spec.checkpoint.storage.azureAccess presigned needs type azure"},
		"a model from presigned gcs":     {spec: `{"checkpoint": {"storage": {"type": "gcs", "gcsBucket": "ckpt", "gcsAccess": "presigned"}}, "output": {"model": {"image": "registry.example.com/team/model:v1"}}}`, want: "spec.output.model is published with the job's own identity, not the operator's pre-signed URLs: remove spec.checkpoint.storage.s3Access, gcsAccess or azureAccess presigned"},
		"gcs presigned with a key":       {spec: `{"checkpoint": {"storage": {"type": "gcs", "gcsBucket": "ckpt", "gcsAccess": "presigned", "credentialsSecretRef": {"name": "s"}}}}`, want: "spec.checkpoint.storage.gcsAccess presigned needs type gcs, no credentialsSecretRef and no prefix"},
		"gcs presigned with a prefix":    {spec: `{"checkpoint": {"storage": {"type": "gcs", "gcsBucket": "ckpt", "gcsAccess": "presigned", "prefix": "team-b"}}}`, want: "spec.checkpoint.storage.gcsAccess presigned needs type gcs, no credentialsSecretRef and no prefix"},
		"gcs presigned for s3":           {spec: `{"checkpoint": {"storage": {"type": "s3", "s3Bucket": "ckpt", "gcsAccess": "presigned"}}}`, want: "remove them or remove gcsAccess"},
		"priority and class disagree":    {spec: `{"scheduling": {"priority": "high", "priorityClassName": "low"}}`, want: "spec.scheduling.priority and spec.scheduling.priorityClassName name the same PriorityClass"},
		"queue not a name":               {spec: `{"scheduling": {"queue": "Team_A"}}`, want: "spec.scheduling.queue must be a LocalQueue name"},
		"topology level not a name":      {spec: `{"scheduling": {"topology": {"level": "one rack"}}}`, want: `spec.scheduling.topology.level: Invalid value: "one rack"`},
		"unknown capacity":               {spec: `{"scheduling": {"capacity": "preemptible"}}`, want: `spec.scheduling.capacity: Unsupported value: "preemptible": supported values: "spot", "on-demand", "any"`},
		"unknown topology mode":          {spec: `{"scheduling": {"topology": {"level": "rack", "mode": "always"}}}`, want: `spec.scheduling.topology.mode: Unsupported value: "always"`},
		"metrics port is the master's":   {spec: `{"monitoring": {"metricsPort": 29500}, "networking": {"masterPort": 29500}}`, want: "spec.monitoring.metricsPort must differ from spec.networking.masterPort"},
		"unknown backend":                {spec: `{"networking": {"backend": "tcp"}}`, want: `spec.networking.backend: Unsupported value: "tcp"`},
		"privileged master port":         {spec: `{"networking": {"masterPort": 80}}`, want: "spec.networking.masterPort"},
		"unknown restart policy":         {spec: `{"failurePolicy": {"restartPolicy": "Always"}}`, want: `spec.failurePolicy.restartPolicy: Unsupported value: "Always"`},
		"negative backoff":               {spec: `{"failurePolicy": {"backoffLimit": -1}}`, want: "spec.failurePolicy.backoffLimit"},
		"zero deadline":                  {spec: `{"failurePolicy": {"activeDeadlineSeconds": 0}}`, want: "spec.failurePolicy.activeDeadlineSeconds"},
		"accuracy above one":             {spec: `{"successPolicy": {"targetAccuracy": 1.5}}`, want: "spec.successPolicy.targetAccuracy must be between 0 and 1"},
		"zero patience":                  {spec: `{"successPolicy": {"earlyStoppingPatience": 0}}`, want: "spec.successPolicy.earlyStoppingPatience"},
		"negative ttl":                   {spec: `{"ttlSecondsAfterFinished": -5}`, want: "spec.ttlSecondsAfterFinished"},
		"model image without a tag":      {spec: `{"output": {"model": {"image": "registry.example.com/team/model"}}}`, want: "spec.output.model.image must be an OCI reference with a registry, a repository and a tag"},
		"model image without a registry": {spec: `{"output": {"model": {"image": "model:v1"}}}`, want: "spec.output.model.image must be an OCI reference"},
		"model image missing":            {spec: `{"output": {"model": {"credentialsSecretRef": {"name": "push"}}}}`, want: "spec.output.model.image: Required value"},
		"additional params not a string": {spec: `{"hyperparameters": {"additionalParams": {"dropout": 0.1}}}`, want: "spec.hyperparameters.additionalParams.dropout"},
		"managedBy without a domain":     {spec: `{"managedBy": "multikueue"}`, want: "spec.managedBy must be a domain-prefixed path such as kueue.x-k8s.io/multikueue"},
		"managedBy too long":             {spec: `{"managedBy": "example.com/` + strings.Repeat("m", 60) + `"}`, want: "spec.managedBy: Too long"},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			u := fromYAML(t, strings.Replace(validSpec, "NAME", fmt.Sprintf("invalid-%d", i), 1))
			wantInvalid(t, c, u, tc.spec, tc.want)
			// Rejected means nothing was stored.
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), &v1alpha1.TrainingJob{}); !apierrors.IsNotFound(err) {
				t.Errorf("after the rejection Get returned %v, want NotFound", err)
			}
		})
	}
	if len(cases) < 20 {
		t.Fatalf("only %d invalid specs covered", len(cases))
	}
}

func TestElasticJobIsAcceptedAndDefaulted(t *testing.T) {
	c := cluster(t)
	ns := namespace(t, c, "api-elastic")
	job := &v1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns},
		Spec: v1alpha1.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 4, MinWorkers: ptr.To[int32](2),
			Elastic: &v1alpha1.ElasticSpec{MinScalingEfficiency: ptr.To[int32](70)}},
	}
	if err := c.Client.Create(t.Context(), job); err != nil {
		t.Fatalf("an elastic pytorch job with minWorkers below numWorkers was refused: %v", err)
	}
	if got := job.Spec.Elastic.ResizeCooldownSeconds; got == nil || *got != v1alpha1.DefaultResizeCooldownSeconds {
		t.Errorf("spec.elastic.resizeCooldownSeconds = %v, want the default %d", got, v1alpha1.DefaultResizeCooldownSeconds)
	}
	// Kueue starts it with fewer workers, as numWorkers' annotation says, and numWorkers stays.
	job.Annotations = map[string]string{v1alpha1.AnnotationElasticWorkers: "2"}
	job.Spec.Suspend = ptr.To(false)
	if err := c.Client.Update(t.Context(), job); err != nil {
		t.Errorf("starting the elastic job at 2 workers: %v", err)
	}
}

func TestShapeIsImmutableUnlessSuspended(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-immutable")
	job := &v1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "shape", Namespace: ns},
		Spec:       v1alpha1.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 2, GPUsPerWorker: ptr.To[int32](4)},
	}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(*v1alpha1.TrainingJob)) error {
		var cur v1alpha1.TrainingJob
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), &cur); err != nil {
			t.Fatal(err)
		}
		f(&cur)
		return c.Client.Update(ctx, &cur)
	}
	for name, tc := range map[string]struct {
		change func(*v1alpha1.TrainingJob)
		want   string
	}{
		"numWorkers":    {func(j *v1alpha1.TrainingJob) { j.Spec.NumWorkers = 8 }, "spec.numWorkers is immutable while the job runs"},
		"minWorkers":    {func(j *v1alpha1.TrainingJob) { j.Spec.MinWorkers = ptr.To[int32](1) }, "spec.minWorkers is immutable unless the job is suspended"},
		"gpusPerWorker": {func(j *v1alpha1.TrainingJob) { j.Spec.GPUsPerWorker = ptr.To[int32](8) }, "spec.gpusPerWorker is immutable unless the job is suspended"},
		"framework":     {func(j *v1alpha1.TrainingJob) { j.Spec.Framework = v1alpha1.FrameworkJAX }, "spec.framework is immutable"},
		"gpu":           {func(j *v1alpha1.TrainingJob) { j.Spec.GPU = &v1alpha1.GPUSpec{DeviceClassName: "gpu.nvidia.com"} }, "spec.gpu is immutable unless the job is suspended"},
		"managedBy":     {func(j *v1alpha1.TrainingJob) { j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") }, "spec.managedBy is immutable: delete the job and create it again"},
		"elastic":       {func(j *v1alpha1.TrainingJob) { j.Spec.Elastic = &v1alpha1.ElasticSpec{} }, "spec.elastic can be added or removed only while the job is suspended"},
		"GPUs in resources": {func(j *v1alpha1.TrainingJob) {
			j.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse("4")}}
		}, "spec.resources.limits[nvidia.com/gpu] is immutable unless the job is suspended"},
	} {
		if err := mutate(tc.change); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("changing %s of a running job: error = %v, want %q", name, err, tc.want)
		}
	}
	// A suspended job may be resized: suspend first, then change the shape.
	if err := mutate(func(j *v1alpha1.TrainingJob) { j.Spec.Suspend = ptr.To(true) }); err != nil {
		t.Fatalf("suspending: %v", err)
	}
	if err := mutate(func(j *v1alpha1.TrainingJob) { j.Spec.NumWorkers = 8; j.Spec.MinWorkers = ptr.To[int32](4) }); err != nil {
		t.Errorf("resizing a suspended job: %v", err)
	}
	// Kueue starts a job it admitted partially with the workers admitted, in one update, and
	// suspends it asking for all of them again.
	if err := mutate(func(j *v1alpha1.TrainingJob) { j.Spec.NumWorkers = 6; j.Spec.Suspend = ptr.To(false) }); err != nil {
		t.Errorf("starting a job with the workers Kueue admitted: %v", err)
	}
	if err := mutate(func(j *v1alpha1.TrainingJob) { j.Spec.NumWorkers = 8; j.Spec.Suspend = ptr.To(true) }); err != nil {
		t.Errorf("suspending a job with the workers it asked for: %v", err)
	}
	// Scheduling constraints stay mutable: Kueue injects its flavor's node selector on admission.
	if err := mutate(func(j *v1alpha1.TrainingJob) {
		j.Spec.Scheduling = &v1alpha1.SchedulingSpec{NodeSelector: map[string]string{"nvidia.com/gpu.product": "H100"}}
	}); err != nil {
		t.Errorf("setting a node selector: %v", err)
	}
}

func TestKubectlPrintsTheColumns(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-columns")
	job := &v1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: ns},
		Spec: v1alpha1.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 4, GPUsPerWorker: ptr.To[int32](8),
			Scheduling: &v1alpha1.SchedulingSpec{Queue: "team-a"}},
	}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	job.Status = v1alpha1.TrainingJobStatus{State: v1alpha1.StateRunning, Reason: v1alpha1.ReasonPodsRunning, Progress: "45%", CurrentEpoch: 3, TotalEpochs: 10,
		Resources: &v1alpha1.ResourcesStatus{GPUs: 32},
		Cost:      &v1alpha1.CostStatus{GPUHours: 3.1, Amount: ptr.To(12.34), Currency: "USD", Summary: "12.34 USD"}}
	if err := c.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	out := util.MustKubectl(t, c, "get", "trainingjobs", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	defer func() {
		// The tracker run's page and the published model's digest: in -o wide and describe.
		const url, digest = "http://mlflow:5000/#/experiments/1/runs/3b9d", "sha256:4e1f"
		job.Status.Tracking = &v1alpha1.TrackingStatus{MLflowRunID: "3b9d", URL: url}
		job.Status.Model = &v1alpha1.ModelStatus{Reference: "registry.example.com/team/llama:v1", Digest: digest}
		if err := c.Client.Status().Update(ctx, job); err != nil {
			t.Fatal(err)
		}
		wide := strings.Split(strings.TrimSpace(util.MustKubectl(t, c, "get", "trainingjobs", "-n", ns, "-o", "wide")), "\n")
		header, row := strings.Fields(wide[0]), strings.Fields(wide[1])
		if !strings.HasSuffix(strings.Join(header, " "), "AGE RUN MODEL") || row[len(row)-2] != url || row[len(row)-1] != digest {
			t.Errorf("kubectl get -o wide:\n%s\nwant RUN %s and MODEL %s last", strings.Join(wide, "\n"), url, digest)
		}
		if d := util.MustKubectl(t, c, "describe", "trainingjob", "llama", "-n", ns); !strings.Contains(d, url) || !strings.Contains(d, digest) {
			t.Errorf("kubectl describe does not show the run %s and the model %s:\n%s", url, digest, d)
		}
	}()
	if got, want := strings.Fields(lines[0]), []string{"NAME", "STATE", "REASON", "PROGRESS", "EPOCH", "WORKERS", "GPUS", "QUEUE", "COST", "STARTS", "AGE"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get trainingjobs header = %v, want %v", got, want)
	}
	if at := strings.Index(lines[0], "COST"); at < 0 || !strings.HasPrefix(lines[1][at:], "12.34 USD ") {
		t.Errorf("kubectl get trainingjobs:\n%s\nwant COST 12.34 USD", out)
	}
	if got, want := strings.Fields(lines[1])[:8], []string{"llama", "Running", "PodsRunning", "45%", "3", "4", "32", "team-a"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get trainingjobs row = %v, want %v", got, want)
	}
	if short := util.MustKubectl(t, c, "get", "tj", "-n", ns, "-o", "name"); strings.TrimSpace(short) != "trainingjob.convoy.dev/llama" {
		t.Errorf("kubectl get tj = %q, want the short name to work", short)
	}
	if doc := util.MustKubectl(t, c, "explain", "trainingjob.spec.numWorkers"); !strings.Contains(doc, "number of worker pods in the gang") {
		t.Errorf("kubectl explain trainingjob.spec.numWorkers does not show the field's documentation:\n%s", doc)
	}

	gn := &v1alpha1.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: framework.Unique(t, "gpu-node-columns")}}
	if err := c.Client.Create(ctx, gn); err != nil {
		t.Fatal(err)
	}
	gn.Status.GPUs = []v1alpha1.GPUDevice{
		{Index: 0, Product: "NVIDIA-H100-80GB-HBM3", Health: v1alpha1.GPUHealthy},
		{Index: 1, Product: "NVIDIA-H100-80GB-HBM3", Health: v1alpha1.GPUHealthy, AllocatedTo: "ns/pod"},
		{Index: 2, Product: "NVIDIA-H100-80GB-HBM3", Health: v1alpha1.GPUUnhealthy, HealthReason: "XID 79"},
	}
	gn.Status.Links = []v1alpha1.GPULink{{A: 0, B: 1, Type: v1alpha1.LinkNVLink, NVLinks: 18}}
	gn.Status.Summarize()
	if err := c.Client.Status().Update(ctx, gn); err != nil {
		t.Fatal(err)
	}
	out = util.MustKubectl(t, c, "get", "gpunodes", gn.Name)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if got, want := strings.Fields(lines[0]), []string{"NAME", "GPUS", "PRODUCT", "HEALTHY", "FREE", "AGE"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get gpunodes header = %v, want %v", got, want)
	}
	if got, want := strings.Fields(lines[1])[:5], []string{gn.Name, "3", "NVIDIA-H100-80GB-HBM3", "2", "1"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kubectl get gpunodes row = %v, want %v", got, want)
	}
}

// TestModelImageValidationAgreesWithOras: what the CRD accepts as spec.output.model.image is what
// the publish step (oras-go's reference parser, a tag required) can push to.
func TestModelImageValidationAgreesWithOras(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-model-image")
	for i, ref := range []string{
		"registry.example.com/team/llama-ft:v1", "localhost:5000/m:latest", "10.0.0.1:5000/a/b/c:1.0_rc-2",
		"ghcr.io/org/model__x:v1", "registry.example.com/team/llama", "registry.example.com/Team/llama:v1",
		"registry.example.com/team/llama:-v1", "registry.example.com/team/llama@sha256:" + strings.Repeat("a", 64),
		"llama:v1", "registry.example.com/team/llama:v1 ", "https://registry.example.com/team/llama:v1",
	} {
		_, orasErr := publish.ParseReference(ref)
		job := &v1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("img-%d", i), Namespace: ns},
			Spec: v1alpha1.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 1,
				Output: &v1alpha1.OutputSpec{Model: &v1alpha1.ModelOutput{Image: ref}}}}
		apiErr := c.Client.Create(ctx, job)
		if (apiErr == nil) != (orasErr == nil) {
			t.Errorf("%q: the API server says %v, oras-go %v", ref, apiErr, orasErr)
		}
	}
}

// wantInvalid merges the YAML patch into u's spec (a null value removes the field), creates u and
// fails the test unless the API server refuses it as Invalid with an error that contains want.
func wantInvalid(t *testing.T, c *framework.Cluster, u *unstructured.Unstructured, patchYAML, want string) {
	t.Helper()
	var patch map[string]any
	if err := yaml.Unmarshal([]byte(patchYAML), &patch); err != nil {
		t.Fatal(err)
	}
	spec := u.Object["spec"].(map[string]any)
	for k, v := range patch {
		if v == nil {
			delete(spec, k)
		} else {
			spec[k] = v
		}
	}
	err := c.Client.Create(t.Context(), u)
	if err == nil {
		t.Fatalf("the API server accepted an invalid %s; want an error containing %q", u.GetKind(), want)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v\nwant an Invalid error containing %q", err, want)
	}
}

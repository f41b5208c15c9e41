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

// Package apivalidation checks objects as the API server does on create, with the API server's own
// code: custom resources against their CRD (OpenAPI schema, defaults, CEL rules) through
// k8s.io/apiextensions-apiserver's strategy, and the operator's children through
// k8s.io/kubernetes' core validation after the API server's defaulting. The fuzz tests use it to
// tell the specs the API server accepts from the others.
package apivalidation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	k8scorev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

// CRD validates the custom resources of one CustomResourceDefinition's storage version.
type CRD struct {
	gvk        schema.GroupVersionKind
	structural *structuralschema.Structural
	create     interface {
		PrepareForCreate(context.Context, apiruntime.Object)
		Validate(context.Context, apiruntime.Object) field.ErrorList
	}
	status interface {
		PrepareForUpdate(context.Context, apiruntime.Object, apiruntime.Object)
		ValidateUpdate(context.Context, apiruntime.Object, apiruntime.Object) field.ErrorList
	}
}

// TrainingJobs is the CRD of deploy/crd/bases/convoy.dev_trainingjobs.yaml, as generated.
func TrainingJobs() (*CRD, error) {
	return LoadCRD(filepath.Join(repoRoot(), "deploy", "crd", "bases", "convoy.dev_trainingjobs.yaml"))
}

// PodGroups is scheduler-plugins' PodGroup CRD, from the module go.mod pins, found beside the
// source of its Go types without running the go command (a fuzz worker loads it as it starts).
func PodGroups() (*CRD, error) {
	fn := runtime.FuncForPC(reflect.ValueOf((*schedv1alpha1.PodGroup).DeepCopy).Pointer())
	file, _ := fn.FileLine(fn.Entry())
	// file is <module>/apis/scheduling/v1alpha1/<file>.go; built with -trimpath, <module> is
	// <path>@<version>, relative to the module cache.
	if !filepath.IsAbs(file) {
		file = filepath.Join(moduleCache(), file)
	}
	module := filepath.Join(filepath.Dir(file), "..", "..", "..")
	return LoadCRD(filepath.Join(module, "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
}

// LoadCRD reads a CustomResourceDefinition and builds what the API server validates its storage
// version's objects with.
func LoadCRD(path string) (*CRD, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, err
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("%s is not a structural schema: %w", path, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, err
		}
		var status *apiextensionsinternal.CustomResourceSubresourceStatus
		var statusValidator apiservervalidation.SchemaValidator
		if v.Subresources != nil && v.Subresources.Status != nil {
			status = &apiextensionsinternal.CustomResourceSubresourceStatus{}
			statusSchema := internal.OpenAPIV3Schema.Properties["status"]
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema); err != nil {
				return nil, err
			}
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		strategy := customresource.NewStrategy(unstructuredTyper{}, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk,
			validator, statusValidator, structural, status, nil, nil)
		return &CRD{gvk: gvk, structural: structural, create: strategy, status: customresource.NewStatusStrategy(strategy)}, nil
	}
	return nil, fmt.Errorf("%s has no storage version", path)
}

// Schema is the structural schema of the CRD's storage version.
func (c *CRD) Schema() *structuralschema.Structural { return c.structural }

// Create is what the API server does with obj (a typed object, or an *unstructured.Unstructured
// as a client sent it) on create: it prunes unknown fields, applies the schema's defaults, and
// validates the result. It returns the object as stored, or why it is refused.
func (c *CRD) Create(obj apiruntime.Object) (*unstructured.Unstructured, field.ErrorList) {
	u, err := c.decode(obj)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	ctx := genericapirequest.WithNamespace(context.Background(), u.GetNamespace())
	c.create.PrepareForCreate(ctx, u)
	return u, c.create.Validate(ctx, u)
}

// UpdateStatus is the API server's validation of a status update from old to obj.
func (c *CRD) UpdateStatus(obj, old apiruntime.Object) field.ErrorList {
	u, err := c.decode(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("status"), err)}
	}
	o, err := c.decode(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("status"), err)}
	}
	// An update names the version it replaces.
	for _, x := range []*unstructured.Unstructured{u, o} {
		if x.GetResourceVersion() == "" {
			x.SetResourceVersion("1")
		}
	}
	ctx := genericapirequest.WithNamespace(context.Background(), u.GetNamespace())
	c.status.PrepareForUpdate(ctx, u, o)
	return c.status.ValidateUpdate(ctx, u, o)
}

// decode is what the API server's decoder makes of obj: unknown fields pruned, defaults applied.
func (c *CRD) decode(obj apiruntime.Object) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(c.gvk)
	// As the API server's unstructuredSchemaCoercer: metadata is read as an ObjectMeta (its unknown
	// and malformed fields dropped) and written back clean after the schema's pruning.
	meta, found, err := schemaobjectmeta.GetObjectMeta(u.Object, true)
	if err != nil {
		return nil, err
	}
	structuralpruning.Prune(u.Object, c.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, c.structural)
	structuraldefaulting.Default(u.Object, c.structural)
	if found {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, meta); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func toUnstructured(obj apiruntime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	m, err := apiruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Pod is the API server's validation of a pod's create, after its defaults and the ServiceAccount
// admission plugin's (which every cluster runs: it names the default ServiceAccount).
func Pod(pod *corev1.Pod) field.ErrorList {
	pod = pod.DeepCopy()
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	return validateCore(pod, k8scorev1.SetObjectDefaults_Pod, k8scorev1.Convert_v1_Pod_To_core_Pod, func(p *core.Pod) field.ErrorList {
		return corevalidation.ValidatePodCreate(p, podutil.GetValidationOptionsFromPodSpecAndMeta(&p.Spec, nil, &p.ObjectMeta, nil))
	})
}

// Service is the API server's validation of a Service's create, after its defaults and the
// Service storage's own (clusterIPs from clusterIP).
func Service(svc *corev1.Service) field.ErrorList {
	svc = svc.DeepCopy()
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	return validateCore(svc, k8scorev1.SetObjectDefaults_Service, k8scorev1.Convert_v1_Service_To_core_Service, corevalidation.ValidateServiceCreate)
}

// ConfigMap is the API server's validation of a ConfigMap.
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	return validateCore(cm, k8scorev1.SetObjectDefaults_ConfigMap, k8scorev1.Convert_v1_ConfigMap_To_core_ConfigMap, corevalidation.ValidateConfigMap)
}

// Secret is the API server's validation of a Secret.
func Secret(s *corev1.Secret) field.ErrorList {
	return validateCore(s, k8scorev1.SetObjectDefaults_Secret, k8scorev1.Convert_v1_Secret_To_core_Secret, corevalidation.ValidateSecret)
}

// PersistentVolumeClaim is the API server's validation of a claim's create, after its defaults.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	return validateCore(pvc, k8scorev1.SetObjectDefaults_PersistentVolumeClaim, k8scorev1.Convert_v1_PersistentVolumeClaim_To_core_PersistentVolumeClaim,
		func(c *core.PersistentVolumeClaim) field.ErrorList {
			return corevalidation.ValidatePersistentVolumeClaim(c, corevalidation.ValidationOptionsForPersistentVolumeClaim(c, nil))
		})
}

// validateCore defaults a copy of obj as the API server does, converts it to the internal version
// and validates it there.
func validateCore[V any, PV interface {
	*V
	DeepCopy() *V
}, I any](obj PV, defaults func(*V), convert func(*V, *I, conversion.Scope) error, validate func(*I) field.ErrorList) field.ErrorList {
	in := obj.DeepCopy()
	defaults(in)
	out := new(I)
	if err := convert(in, out, nil); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	return validate(out)
}

// unstructuredTyper names the kind of an unstructured object, as the API server's typer for custom
// resources does.
type unstructuredTyper struct{}

func (unstructuredTyper) ObjectKinds(obj apiruntime.Object) ([]schema.GroupVersionKind, bool, error) {
	return []schema.GroupVersionKind{obj.GetObjectKind().GroupVersionKind()}, false, nil
}

func (unstructuredTyper) Recognizes(schema.GroupVersionKind) bool { return true }

// moduleCache is the go command's module cache: $GOMODCACHE, else $GOPATH/pkg/mod (the first
// GOPATH entry), else ~/go/pkg/mod.
func moduleCache() string {
	if dir := os.Getenv("GOMODCACHE"); dir != "" {
		return dir
	}
	if gopath := filepath.SplitList(os.Getenv("GOPATH")); len(gopath) > 0 && gopath[0] != "" {
		return filepath.Join(gopath[0], "pkg", "mod")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, "go", "pkg", "mod")
}

// repoRoot is the repository the test runs in: the nearest directory above the working directory
// (a test's package directory) that holds a go.mod. The source file's own path would not do: with
// -trimpath (the Makefile's) it is an import path, not a directory.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("no go.mod above " + dir)
		}
		dir = parent
	}
}

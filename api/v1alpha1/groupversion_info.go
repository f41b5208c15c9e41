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

// Package v1alpha1 holds the Convoy API: TrainingJob, the unit a data scientist submits;
// TrainingSweep, a hyperparameter search that runs TrainingJobs as its trials; and GPUNode, the
// per-node GPU inventory and topology the node agent publishes for the scheduler.
// +kubebuilder:object:generate=true
// +groupName=convoy.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Convoy type.
	GroupVersion = schema.GroupVersion{Group: "convoy.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Convoy types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Convoy types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are the kinds each type's file registers.
	knownTypes []runtime.Object
)

// register adds kinds of this group and version, from each type's file.
func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

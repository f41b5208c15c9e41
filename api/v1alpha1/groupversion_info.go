// Package v1alpha1 holds the Convoy API: TrainingJob, the unit a data scientist submits, and GPUNode,
// the per-node GPU inventory and topology the node agent publishes for the scheduler.
// +kubebuilder:object:generate=true
// +groupName=convoy.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Convoy type.
	GroupVersion = schema.GroupVersion{Group: "convoy.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Convoy types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Convoy types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

var (
	// The kube-scheduler's own v1 builder: its plugin-args conversion scheme is built from it.
	localSchemeBuilder = &schedschemev1.SchemeBuilder
	// AddToScheme registers the v1 args types with their defaults and conversions.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &GangPlacementArgs{}, &GangPreemptionArgs{})
	return nil
}

func init() {
	// The generated conversions register themselves (zz_generated.conversion.go); the known types
	// and the generated defaulters are registered here.
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}

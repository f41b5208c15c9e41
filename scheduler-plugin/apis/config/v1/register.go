package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
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

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&GangPlacementArgs{}, func(obj interface{}) { SetDefaults_GangPlacementArgs(obj.(*GangPlacementArgs)) })
	scheme.AddTypeDefaultingFunc(&GangPreemptionArgs{}, func(obj interface{}) { SetDefaults_GangPreemptionArgs(obj.(*GangPreemptionArgs)) })
	return nil
}

func addConversionFuncs(scheme *runtime.Scheme) error {
	if err := scheme.AddConversionFunc((*GangPlacementArgs)(nil), (*config.GangPlacementArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs(a.(*GangPlacementArgs), b.(*config.GangPlacementArgs))
	}); err != nil {
		return err
	}
	if err := scheme.AddConversionFunc((*config.GangPlacementArgs)(nil), (*GangPlacementArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs(a.(*config.GangPlacementArgs), b.(*GangPlacementArgs))
	}); err != nil {
		return err
	}
	if err := scheme.AddConversionFunc((*GangPreemptionArgs)(nil), (*config.GangPreemptionArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_v1_GangPreemptionArgs_To_config_GangPreemptionArgs(a.(*GangPreemptionArgs), b.(*config.GangPreemptionArgs))
	}); err != nil {
		return err
	}
	return scheme.AddConversionFunc((*config.GangPreemptionArgs)(nil), (*GangPreemptionArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_config_GangPreemptionArgs_To_v1_GangPreemptionArgs(a.(*config.GangPreemptionArgs), b.(*GangPreemptionArgs))
	})
}

func init() {
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addConversionFuncs)
}

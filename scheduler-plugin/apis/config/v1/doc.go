// Package v1 is the v1 version of the Convoy scheduler plugins' args, as a
// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) spells them. Their conversions to the
// internal types and their defaulters are generated (zz_generated.conversion.go,
// zz_generated.defaults.go) from the SetDefaults_ functions in defaults.go and the manual
// conversions in conversion.go.
// +kubebuilder:object:generate=true
// +k8s:conversion-gen=github.com/convoy-dev/convoy/scheduler-plugin/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1

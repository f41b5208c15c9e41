// Package v1 is the v1 version of the Convoy scheduler plugins' args, as a
// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) spells them.
// +kubebuilder:object:generate=true
// +groupName=kubescheduler.config.k8s.io
package v1

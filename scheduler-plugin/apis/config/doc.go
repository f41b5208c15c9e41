// Package config holds the internal types of the Convoy scheduler plugins' args. They are
// registered in the kube-scheduler's config scheme so that a KubeSchedulerConfiguration decodes
// them.
// +kubebuilder:object:generate=true
// +groupName=kubescheduler.config.k8s.io
package config

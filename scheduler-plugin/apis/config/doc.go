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

// Package config holds the internal types of the Convoy scheduler plugins' args. They are
// registered in the kube-scheduler's config scheme so that a KubeSchedulerConfiguration decodes
// them.
// +kubebuilder:object:generate=true
// +groupName=kubescheduler.config.k8s.io
package config

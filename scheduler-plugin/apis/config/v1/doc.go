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

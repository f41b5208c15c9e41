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

package gangcore

import (
	"k8s.io/apimachinery/pkg/runtime"
	kubeschedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
)

// UpstreamArgs fills internal with an upstream plugin's default args, as kube-scheduler gives them
// to a profile that names the plugin without args: versioned is a zero value of the args'
// kubescheduler.config.k8s.io/v1 type, defaulted and converted by kube-scheduler's own scheme.
func UpstreamArgs(versioned, internal runtime.Object) error {
	kubeschedscheme.Scheme.Default(versioned)
	return kubeschedscheme.Scheme.Convert(versioned, internal, nil)
}

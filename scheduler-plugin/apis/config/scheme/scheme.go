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

// Package scheme registers the Convoy scheduler plugins' args in the kube-scheduler's config
// scheme. Import it (blank) in the scheduler's main, as scheduler-plugins' own scheme package, or
// a KubeSchedulerConfiguration fails to decode the args.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	configv1 "github.com/convoy-dev/convoy/scheduler-plugin/apis/config/v1"
)

// Scheme is the kube-scheduler's config scheme, with the Convoy args added.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
}

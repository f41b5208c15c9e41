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

package builder

import (
	"testing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestNetworkPolicy(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(4).Obj()
	if np := NetworkPolicy(job, Options{}); np != nil {
		t.Errorf("NetworkPolicy without Options.JobNetworkPolicy = %+v, want none", np)
	}
	np := NetworkPolicy(job, Options{JobNetworkPolicy: true})
	if np == nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 0 || np.Spec.Ingress[0].From[0].PodSelector.MatchLabels[convoy.LabelJobName] != "llm" {
		t.Errorf("NetworkPolicy without monitoring = %+v, want one rule: every port, from the job's pods only", np)
	}
	job.Spec.Monitoring = &convoy.MonitoringSpec{Enabled: true, MetricsPort: 9400}
	np = NetworkPolicy(job, Options{JobNetworkPolicy: true})
	if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[1].Ports[0].Port.IntValue() != 9400 || len(np.Spec.Ingress[1].From) != 0 {
		t.Errorf("NetworkPolicy with monitoring = %+v, want the metrics port 9400 open to every peer", np.Spec.Ingress)
	}
}

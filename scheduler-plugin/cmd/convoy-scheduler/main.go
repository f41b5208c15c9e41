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

// Command convoy-scheduler is the upstream kube-scheduler with scheduler-plugins' Coscheduling and
// Convoy's GangGate, GangPlacement, GangPreemption and bindquiet plugins registered. It is
// configured only through KubeSchedulerConfiguration: see deploy/scheduler. Coscheduling is
// upstream's plugin, made through pkg/coscheduling: in a profile that runs GangPlacement it finds a
// gang's pods from GangPlacement's index instead of listing the namespace.
package main

import (
	"os"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as upstream's main
	// client-go's metrics, leader_election_master_status among them, as upstream's main registers
	// them; the placement check (pkg/admissioncheck) reads that gauge to know it leads.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	// Register the plugins' args types, or their args fail to decode
	// ("want args to be of type CoschedulingArgs, got *runtime.Unknown").
	_ "github.com/convoy-dev/convoy/scheduler-plugin/apis/config/scheme"
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/bindquiet"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/coscheduling"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/ganggate"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangplacement"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangpreemption"
)

func main() {
	// Coscheduling's and GangPlacement's caches are controller-runtime's: log them through klog.
	ctrllog.SetLogger(klog.NewKlogr())
	// A gang's pods wait in Permit only until their siblings are reserved, which GangGate and
	// GangPlacement make a matter of one plan: upstream's NominatedNodeNameForExpectation (beta, on
	// since 1.35) would write every gang pod's status once more to tell the cluster autoscaler of
	// that wait. --feature-gates=NominatedNodeNameForExpectation=true turns it back on.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.NominatedNodeNameForExpectation): false}); err != nil {
		klog.ErrorS(err, "Setting Convoy's default feature gates")
		os.Exit(1)
	}
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(bindquiet.InterPodAffinityName, bindquiet.NewInterPodAffinity),
		app.WithPlugin(bindquiet.PodTopologySpreadName, bindquiet.NewPodTopologySpread),
		app.WithPlugin(bindquiet.DynamicResourcesName, bindquiet.NewDynamicResources),
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(ganggate.Name, ganggate.New),
		app.WithPlugin(gangplacement.Name, gangplacement.New),
		app.WithPlugin(gangpreemption.Name, gangpreemption.New),
	)
	os.Exit(cli.Run(cmd))
}

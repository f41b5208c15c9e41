// Command kube-scheduler is the upstream kube-scheduler with scheduler-plugins' Coscheduling and
// Convoy's plugins registered. It is configured only through KubeSchedulerConfiguration.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	// Registers the scheduler-plugins args types, or CoschedulingArgs fail to decode.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

func main() {
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(coscheduling.Name, coscheduling.New),
	)
	os.Exit(cli.Run(cmd))
}

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

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

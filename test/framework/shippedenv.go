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

package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	podresource "k8s.io/kubectl/pkg/util/resource"
	"sigs.k8s.io/yaml"
)

// ShippedEnv returns, as NAME=value, the environment that the Deployment named deployment in file
// (relative to the repository's root, such as deploy/scheduler/deployment.yaml) gives its first
// container, so that a benchmark starts the binary as it ships (see DeploymentEnv).
func ShippedEnv(file, deployment string) ([]string, error) {
	data, path, err := readShipped(file)
	if err != nil {
		return nil, err
	}
	env, err := DeploymentEnv(data, deployment)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}

// ShippedFlags returns the arguments of the same container that set one of the flags named (see
// DeploymentFlags).
func ShippedFlags(file, deployment string, flags ...string) ([]string, error) {
	data, path, err := readShipped(file)
	if err != nil {
		return nil, err
	}
	out, err := DeploymentFlags(data, deployment, flags...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// DeploymentFlags returns the arguments (command, then args) of the first container of the
// Deployment named deployment in the manifests data that set one of the flags named, such as
// --kube-api-qps=300, in their order.
func DeploymentFlags(data []byte, deployment string, flags ...string) ([]string, error) {
	ctr, err := deploymentContainer(data, deployment)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, arg := range slices.Concat(ctr.Command, ctr.Args) {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(flags, name) {
			out = append(out, arg)
		}
	}
	return out, nil
}

func readShipped(file string) ([]byte, string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(root, file)
	data, err := os.ReadFile(path)
	return data, path, err
}

// deploymentContainer is the first container of the Deployment named deployment in data.
func deploymentContainer(data []byte, deployment string) (*corev1.Container, error) {
	var found *appsv1.Deployment
	err := EachYAMLDoc(data, func(doc []byte) error {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil {
			return err
		}
		if d.Kind == "Deployment" && d.Name == deployment {
			found = &d
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil || len(found.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("no Deployment %s with a container", deployment)
	}
	return &found.Spec.Template.Spec.Containers[0], nil
}

// DeploymentEnv returns, as NAME=value, the environment that the Deployment named deployment in
// the manifests data gives its first container: literal values, and a resourceFieldRef to one of the
// container's own requests or limits (GOMEMLIMIT from limits.memory), in its divisor's units, as
// the kubelet reads it. Values the kubelet takes from the Pod's metadata (fieldRef) are left out.
func DeploymentEnv(data []byte, deployment string) ([]string, error) {
	ctr, err := deploymentContainer(data, deployment)
	if err != nil {
		return nil, err
	}
	var env []string
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.ResourceFieldRef != nil:
			// As the kubelet reads it, rounded up in the divisor's units.
			v, err := podresource.ExtractContainerResourceValue(e.ValueFrom.ResourceFieldRef, ctr)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if v == "0" {
				// The kubelet would use the node's allocatable, which a benchmark does not know.
				return nil, fmt.Errorf("env %s refers to %s, which container %s does not set", e.Name, e.ValueFrom.ResourceFieldRef.Resource, ctr.Name)
			}
			env = append(env, e.Name+"="+v)
		}
	}
	return env, nil
}

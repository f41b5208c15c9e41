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

// Package simdeviceplugin is a Kubernetes device plugin for tests: it advertises the GPUs of one of
// Convoy's mock NVML profiles (nvmlmock) as nvidia.com/gpu through a real kubelet's device-plugin
// API, with the GPUs' mock UUIDs as device IDs. The node agent, run with the same profile and node
// name, then reads the kubelet's PodResources API and maps the IDs the kubelet allocated to its
// mocked GPUs. The command is test/cmd/simdeviceplugin; see README.md.
package simdeviceplugin

// BinaryName is the command's file name in the bin directory.
const BinaryName = "simdeviceplugin"

// Args returns the arguments (without the program name) that run the plugin for nodeName's GPUs
// of the mock NVML profile. dir is the kubelet's device-plugin directory as the plugin sees it:
// the kubelet always serves /var/lib/kubelet/device-plugins/kubelet.sock, whatever its --root-dir,
// so for a kubelet in its own mount namespace dir is the directory bound there.
func Args(dir, nodeName, profile string) []string {
	return []string{
		"--device-plugin-dir=" + dir,
		"--node-name=" + nodeName,
		"--nvml=mock:" + profile,
	}
}

// NodeAgentArgs returns the node agent's arguments (without the program name, the kubeconfig and
// the metrics address) that serve nodeName over the same mock GPUs as Args, reading which pod
// holds each GPU from the kubelet's PodResources socket (<the kubelet's --root-dir>/pod-resources/kubelet.sock).
// The socket must exist when the agent starts.
func NodeAgentArgs(nodeName, profile, podResourcesSocket string) []string {
	return []string{
		"--node-name=" + nodeName,
		"--nvml=mock:" + profile,
		"--pod-resources-socket=" + podResourcesSocket,
	}
}

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

// Package framework runs a real, local Kubernetes control plane for Convoy's integration and e2e
// tests and for `make demo`, from binaries built out of the Go modules pinned in go.mod: no
// Docker, no downloads.
//
// A cluster is etcd, kube-apiserver (client-certificate authentication, Node and RBAC
// authorization), kube-controller-manager with its default controllers, and kwok, which plays
// the kubelet of fake nodes: it keeps them Ready and moves pods bound to them to Running. Every
// component is a child process on loopback ports with its log in the cluster's state directory.
//
// Build the binaries once with `make bin` (Build). A test package then shares one cluster:
//
//	func TestMain(m *testing.M) {
//		framework.Main(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{convoy.AddToScheme}})
//	}
//
//	func TestSomething(t *testing.T) {
//		c := framework.Shared(t)
//		ctx := t.Context()
//		if err := c.CreateNodes(ctx, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2,
//			NodesPerRack: 2, GPUsPerNode: 8, Product: "NVIDIA-H100-80GB-HBM3"}.Nodes()...); err != nil {
//			t.Fatal(err)
//		}
//		// c.Client, c.RESTConfig, c.KubeconfigPath, c.InstallCRDs, c.StartProcess, ...
//	}
//
// Components under test (the operator, the scheduler, Kueue) run with StartProcess, which gives
// them the cluster's lifecycle and log collection; ServiceAccountKubeconfig gives them exactly the
// RBAC of a ServiceAccount. Processes are killed with the test binary (Pdeathsig), so a crashed or
// timed-out test leaves nothing running. test/cmd/localcluster wraps the same API for the shell.
package framework

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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The real-node network, laid out as kind lays out its node containers: one Linux bridge on the
// host, and per real node a network namespace joined to it by a veth pair. The host end of the
// bridge is the gateway; the API server and the image registry listen there, so that what runs in
// a node's namespace reaches them as it would reach a control-plane node.
//
// RealNetEnv picks one of ten such networks, so that as many processes with real nodes run at once
// on one machine (make test-real runs its packages so): network i is bridge convoy<i> on
// 10.98.<i>.0/24, its nodes' pods in 10.<245+i>.0.0/16, its namespaces and cgroups convoy<i>-<node>.
const (
	// RealNetEnv is the environment variable that picks the process's real-node network, 0–9; 0
	// when unset.
	RealNetEnv = "CONVOY_REAL_NET"
	// ClusterDNSIP is the kube-dns Service's address, which the kubelets put in pods' resolv.conf.
	// Each node's kube-proxy resolves it in the node's namespace, so clusters on different
	// networks share it.
	ClusterDNSIP = "10.0.0.10"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
)

// realNet is the process's network, from RealNetEnv; realNetErr says why RealNetEnv is invalid.
var realNet, realNetErr = realNetIndex(os.Getenv(RealNetEnv))

var (
	// NodeBridge is the host bridge every real node's namespace is attached to.
	NodeBridge = fmt.Sprintf("convoy%d", realNet)
	// NodeGatewayIP is the host's address on NodeBridge.
	NodeGatewayIP = fmt.Sprintf("10.98.%d.1", realNet)
	// nodeSubnetPrefix is NodeBridge's /24; real node n (1-based) is <prefix>.<10+n>.
	nodeSubnetPrefix = fmt.Sprintf("10.98.%d", realNet)
	// realPodCIDRPrefix: real node n gives its pods addresses from <prefix>.<n>.0/24. It lies
	// outside PodCIDR, which kwok's fake pods use.
	realPodCIDRPrefix = fmt.Sprintf("10.%d", 245+realNet)
	// RealPodCIDR covers every real node's pod range, for kube-proxy's clusterCIDR.
	RealPodCIDR = realPodCIDRPrefix + ".0.0/16"
	// nodeNetnsPrefix names the network namespaces, cgroup trees and mount namespaces of real
	// nodes: <prefix><node name>.
	nodeNetnsPrefix = fmt.Sprintf("convoy%d-", realNet)
)

func realNetIndex(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i > 9 {
		return 0, fmt.Errorf("%s=%q: want 0–9, a different one for each process with real nodes that runs at once", RealNetEnv, v)
	}
	return i, nil
}

func nodeIP(index int) string      { return fmt.Sprintf("%s.%d", nodeSubnetPrefix, 10+index) }
func nodePodCIDR(index int) string { return fmt.Sprintf("%s.%d.0/24", realPodCIDRPrefix, index) }
func nodeNetns(name string) string { return nodeNetnsPrefix + name }

// vethName is the host end of a node's veth pair; Linux allows 15 bytes.
func vethName(index int) string { return fmt.Sprintf("cv%dh%d", realNet, index) }

// setupNodeBridge removes what an earlier run on the same network left (the bridge, the real
// nodes' namespaces and routes) and creates the bridge with the gateway address. It needs root.
func setupNodeBridge(ctx context.Context) error {
	if realNetErr != nil {
		return realNetErr
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("real nodes need root (network namespaces, a bridge, containerd): run as root")
	}
	teardownNodeNetwork(ctx)
	for _, args := range [][]string{
		{"link", "add", NodeBridge, "type", "bridge"},
		{"addr", "add", NodeGatewayIP + "/24", "dev", NodeBridge},
		{"link", "set", NodeBridge, "up"},
	} {
		if err := runIP(ctx, args...); err != nil {
			return err
		}
	}
	// Kubelets, containerd and the control planes beside them each hold inotify instances: the
	// kernel's 128 per user run out with two real-node clusters and `make test`'s integration tier
	// at once (a process then fails with "too many open files"). Raised as kind's known issues
	// advise for several kubelets on one host.
	for key, least := range map[string]int{"fs/inotify/max_user_instances": 512, "fs/inotify/max_user_watches": 524288} {
		if err := raiseSysctl(key, least); err != nil {
			return err
		}
	}
	// The host routes between the nodes' pod ranges.
	return writeSysctl("", "net/ipv4/ip_forward", "1")
}

// raiseSysctl sets the host's /proc/sys/<key> to least when it is lower.
func raiseSysctl(key string, least int) error {
	b, err := os.ReadFile("/proc/sys/" + key)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= least {
		return nil
	}
	return writeSysctl("", key, strconv.Itoa(least))
}

// setupNodeNetns creates the network namespace of real node index, its veth pair on the bridge,
// its address and default route, and the host's route to its pod range.
func setupNodeNetns(ctx context.Context, name string, index int) error {
	ns, veth := nodeNetns(name), vethName(index)
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", veth, "master", NodeBridge, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "addr", "add", nodeIP(index) + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", NodeGatewayIP},
		{"route", "replace", nodePodCIDR(index), "via", nodeIP(index)},
	} {
		if err := runIP(ctx, args...); err != nil {
			return err
		}
	}
	// The node routes between its pods' bridge and eth0, and kube-proxy's rules must see bridged
	// traffic, as on any node.
	if err := writeSysctl(ns, "net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	return writeSysctl(ns, "net/bridge/bridge-nf-call-iptables", "1")
}

// Disconnect cuts the node's cable: the host end of its veth pair goes down, so that nothing reaches
// the node or leaves it (the API server, the registry, other nodes' pods) while its kubelet,
// containerd and containers run on. Reconnect plugs it back.
func (n *RealNode) Disconnect(ctx context.Context) error {
	return runIP(ctx, "link", "set", n.veth, "down")
}

// Reconnect undoes Disconnect.
func (n *RealNode) Reconnect(ctx context.Context) error {
	return runIP(ctx, "link", "set", n.veth, "up")
}

// teardownNodeNetwork deletes the bridge and its real nodes' namespaces. Errors are ignored: it
// also runs where nothing was set up.
func teardownNodeNetwork(ctx context.Context) {
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], nodeNetnsPrefix) {
			_ = runIP(ctx, "netns", "delete", f[0])
		}
	}
	if entries, err := os.ReadDir(nodeMountNSDir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), nodeNetnsPrefix) {
				removeNodeMountNS(filepath.Join(nodeMountNSDir, e.Name()))
			}
		}
	}
	_ = runIP(ctx, "link", "delete", NodeBridge)
	routes, _ := exec.CommandContext(ctx, "ip", "route", "show", "root", RealPodCIDR).Output()
	for _, line := range strings.Split(string(routes), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			_ = runIP(ctx, "route", "delete", f[0])
		}
	}
}

func runIP(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// writeSysctl sets /proc/sys/<key> in network namespace ns, or on the host when ns is empty.
func writeSysctl(ns, key, value string) error {
	path := "/proc/sys/" + key
	if ns == "" {
		return os.WriteFile(path, []byte(value), 0o644)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo "+value+" > "+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("setting %s=%s in %s: %w: %s", key, value, ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

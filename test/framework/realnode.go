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
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the processes of a real node, as StartProcess knows them: <name>-<node>.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
	KubeProxy  = "kube-proxy"
)

// RealNodeSpec describes a real node: a kubelet, containerd and kube-proxy in a network namespace
// of their own, running real containers.
type RealNodeSpec struct {
	// Name is the node's name; it must be unique among the cluster's nodes.
	Name string
	// Index numbers the node from 1: it picks the node's address (10.98.<net>.<10+Index>) and its
	// pods' range (10.<245+net>.<Index>.0/24), net being RealNetEnv's. Unique among real nodes, 1–200.
	Index int
	// Labels are the node's labels, set by the kubelet when it registers (--node-labels): keys in
	// kubernetes.io and k8s.io other than the NodeRestriction admission plugin allows are refused.
	Labels map[string]string
	// SandboxImage is the pod sandbox ("pause") image containerd runs for every pod, pulled from the
	// registry like any image.
	SandboxImage string
	// Registry is an insecure (HTTP) registry, host:port, that containerd pulls from.
	Registry string
	// CDI runs containerd 2 (bin/containerd2, `make bin`) instead of the machine's containerd 1.6,
	// which has no CDI, with the CDI specs in /var/run/cdi of the node (RealNode.CDIDir): the
	// containers get the CDI devices a DRA driver prepared for them.
	CDI bool
}

// RealNode is a node started by StartRealNode.
type RealNode struct {
	Name string
	// IP is the node's InternalIP, on NodeBridge.
	IP string
	// PodCIDR is the range its pods' addresses come from.
	PodCIDR string
	// Netns is the name of its network namespace (ip netns).
	Netns string
	// Dir holds its containerd, kubelet and CNI state.
	Dir string
	// ContainerdSocket is containerd's gRPC socket (ctr --address).
	ContainerdSocket string
	// KubeletRootDir is the kubelet's --root-dir.
	KubeletRootDir string
	// DevicePluginDir is where device plugins register with the kubelet (kubelet.sock).
	DevicePluginDir string
	// PodResourcesSocket is the kubelet's PodResources API.
	PodResourcesSocket string
	// CDIDir is the node's /var/run/cdi, where DRA drivers write CDI specs.
	CDIDir string
	// CgroupRoot is the kubelet's cgroupRoot: every pod's cgroup lies below it.
	CgroupRoot string
	// MountNS is the file that holds the node's mount namespace (nsenter --mount).
	MountNS string
	// veth is the host end of its veth pair on NodeBridge.
	veth string
}

// CNIBinDir holds the CNI plugins (bridge, host-local, portmap, loopback): Debian's
// containernetworking-plugins package.
var CNIBinDir = "/usr/lib/cni"

// RealNodeBinaries are the binaries StartRealNode needs besides bin/'s kubelet and kube-proxy, with
// the Debian package that brings each.
var RealNodeBinaries = map[string]string{
	"containerd":              "containerd",
	"containerd-shim-runc-v2": "containerd",
	"runc":                    "runc",
	"iptables":                "iptables",
	"conntrack":               "conntrack",
	"nsenter":                 "util-linux",
	"ip":                      "iproute2",
}

// CheckRealNodePrerequisites returns an error naming what a real node needs and this machine lacks.
func CheckRealNodePrerequisites(binDir string) error {
	var missing []string
	for bin, pkg := range RealNodeBinaries {
		if _, err := lookPath(bin); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", bin, pkg))
		}
	}
	if _, err := os.Stat(filepath.Join(CNIBinDir, "bridge")); err != nil {
		missing = append(missing, "the CNI plugins in "+CNIBinDir+" (Debian package containernetworking-plugins)")
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s: `make real-node-deps` installs them", strings.Join(missing, ", "))
	}
	if err := CheckBinaries(binDir, Kubelet, KubeProxy, DefaultScheduler); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (network namespaces, cgroups, containerd)")
	}
	return nil
}

func lookPath(bin string) (string, error) {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/sbin") {
		p := filepath.Join(dir, bin)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", bin)
}

// StartRealNode starts a real node and waits until it is Ready: its network namespace on
// NodeBridge, containerd, the kubelet and kube-proxy. The cluster must have been started with
// Options.RealNodes. Stop ends the node's processes and containers, unmounts what they mounted and
// removes their cgroups.
func (c *Cluster) StartRealNode(ctx context.Context, spec RealNodeSpec) (*RealNode, error) {
	if !c.realNodes {
		return nil, errors.New("the cluster was started without Options.RealNodes")
	}
	if spec.Index < 1 || spec.Index > 200 {
		return nil, fmt.Errorf("real node %s: Index %d is outside 1–200", spec.Name, spec.Index)
	}
	if err := CheckRealNodePrerequisites(c.BinDir); err != nil {
		return nil, err
	}
	n := &RealNode{
		Name:    spec.Name,
		IP:      nodeIP(spec.Index),
		PodCIDR: nodePodCIDR(spec.Index),
		Netns:   nodeNetns(spec.Name),
		Dir:     filepath.Join(c.StateDir, "nodes", spec.Name),
		// One cgroup tree per node: two kubelets sharing the default /kubepods would each delete the
		// other's pods' cgroups as orphans.
		CgroupRoot: "/" + nodeNetnsPrefix + spec.Name,
		MountNS:    filepath.Join(nodeMountNSDir, nodeNetnsPrefix+spec.Name),
		veth:       vethName(spec.Index),
	}
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd.sock")
	n.KubeletRootDir = filepath.Join(n.Dir, "kubelet")
	n.DevicePluginDir = filepath.Join(n.KubeletRootDir, "device-plugins")
	n.PodResourcesSocket = filepath.Join(n.KubeletRootDir, "pod-resources", "kubelet.sock")
	n.CDIDir = filepath.Join(n.Dir, "cdi")
	for _, d := range []string{n.Dir, n.DevicePluginDir, filepath.Join(n.Dir, "cni")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	c.addCleanup(func() error { return cleanupRealNode(n) })

	if err := setupNodeNetns(ctx, spec.Name, spec.Index); err != nil {
		return nil, fmt.Errorf("real node %s: %w", spec.Name, err)
	}
	if err := setupNodeMountNS(ctx, n); err != nil {
		return nil, fmt.Errorf("real node %s: %w", spec.Name, err)
	}
	if err := createCgroupRoot(n.CgroupRoot); err != nil {
		return nil, fmt.Errorf("real node %s: %w", spec.Name, err)
	}
	if err := n.writeConfigs(c, spec); err != nil {
		return nil, fmt.Errorf("real node %s: %w", spec.Name, err)
	}

	containerd := "containerd"
	if spec.CDI {
		containerd = filepath.Join(c.BinDir, Containerd2Dir, "containerd")
	}
	if err := c.startInNetns(n, Containerd, containerd, []string{"--config", filepath.Join(n.Dir, "containerd.toml")}); err != nil {
		return nil, err
	}
	if err := c.poll(ctx, Containerd+"-"+n.Name, func() (bool, error) {
		_, err := os.Stat(n.ContainerdSocket)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	if err := c.startInNetns(n, Kubelet, Kubelet, []string{
		"--config=" + filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig=" + filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--root-dir=" + n.KubeletRootDir,
		"--cert-dir=" + filepath.Join(n.KubeletRootDir, "pki"),
		"--node-labels=" + joinLabels(spec.Labels),
		"--v=1",
	}); err != nil {
		return nil, err
	}
	if err := c.startInNetns(n, KubeProxy, KubeProxy, []string{
		"--config=" + filepath.Join(n.Dir, "kube-proxy.yaml"),
		"--v=1",
	}); err != nil {
		return nil, err
	}
	if err := c.poll(ctx, Kubelet+"-"+n.Name, func() (bool, error) {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, fmt.Errorf("waiting for real node %s to be Ready: %w", n.Name, err)
	}
	return n, nil
}

// startInNetns starts binary as process <component>-<node> inside the node's network and mount
// namespaces, through nsenter. The kubelet and containerd share the mount namespace, in which the
// kubelet mounts the volumes that containerd gives containers.
func (c *Cluster) startInNetns(n *RealNode, component, binary string, args []string) error {
	path, err := c.lookBinary(binary)
	if err != nil {
		return fmt.Errorf("real node %s: %w", n.Name, err)
	}
	nsenter, err := lookPath("nsenter")
	if err != nil {
		return err
	}
	return c.StartProcess(component+"-"+n.Name, nsenter,
		append([]string{"--net=/run/netns/" + n.Netns, "--mount=" + n.MountNS, "--", path}, args...),
		[]string{"PATH=" + os.Getenv("PATH") + ":/usr/sbin:/sbin"})
}

func joinLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// writeConfigs writes containerd's, the CNI's, the kubelet's and kube-proxy's configuration and
// kubeconfigs into n.Dir.
func (n *RealNode) writeConfigs(c *Cluster, spec RealNodeSpec) error {
	server := fmt.Sprintf("https://%s:%d", NodeGatewayIP, c.apiPort)
	kubelet, err := c.pki.client(Kubelet+"-"+n.Name, "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	if err := writeCertKubeconfig(filepath.Join(n.Dir, "kubelet.kubeconfig"), server, c.pki.caPEM, kubelet); err != nil {
		return err
	}
	proxy, err := c.pki.client(KubeProxy+"-"+n.Name, "system:kube-proxy")
	if err != nil {
		return err
	}
	if err := writeCertKubeconfig(filepath.Join(n.Dir, "kube-proxy.kubeconfig"), server, c.pki.caPEM, proxy); err != nil {
		return err
	}

	hostsDir := filepath.Join(n.Dir, "certs.d")
	cdiCRI, cdiRunc := c.cdiConfig(spec.CDI)
	files := map[string]string{
		"containerd.toml":        fmt.Sprintf(containerdConfig, n.Dir, n.ContainerdSocket, spec.SandboxImage, CNIBinDir, hostsDir, cdiCRI, cdiRunc),
		"cni/10-convoy.conflist": fmt.Sprintf(cniConfig, n.PodCIDR, filepath.Join(n.Dir, "cni-ipam")),
		"kubelet.yaml": fmt.Sprintf(kubeletConfig, n.IP, n.CgroupRoot, n.ContainerdSocket, c.pki.caFile(),
			ClusterDNSIP, ClusterDomain, filepath.Join(n.Dir, "resolv.conf"), filepath.Join(n.Dir, "pods-logs")),
		"kube-proxy.yaml": fmt.Sprintf(kubeProxyConfig, filepath.Join(n.Dir, "kube-proxy.kubeconfig"), n.Name, RealPodCIDR),
		// Pods resolve cluster names through CoreDNS only: nothing outside the machine is reachable.
		"resolv.conf": "",
	}
	if spec.Registry != "" {
		files["certs.d/"+spec.Registry+"/hosts.toml"] = fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", spec.Registry)
	}
	for name, content := range files {
		path := filepath.Join(n.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig is containerd 1.6's configuration (version 2, which containerd 2 reads too) for
// one node; %s: the node's directory, its socket, the sandbox image, the CNI plugins' directory, the
// registry hosts directory, and cdiConfig's two parts.
const containerdConfig = `version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri"]

[grpc]
  address = "%[2]s"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  # This kind of VM forbids lowering oom_score_adj, even for root: without this, runc fails to
  # start the sandbox (the kubelet asks -998 for it).
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's state, so that cleaning up the node finds them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
%[6]s  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
%[7]s  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[4]s"
    conf_dir = "%[1]s/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "%[5]s"
`

// Containerd2Dir is the subdirectory of bin/ with containerd 2 and its runc shim.
const Containerd2Dir = "containerd2"

// cdiConfig is what containerdConfig adds for containerd 2 on a node with cdi: CDI from cdiDir in
// the CRI plugin's table, containerd 2's own shim in the runc runtime's.
func (c *Cluster) cdiConfig(cdi bool) (cri, runc string) {
	if !cdi {
		return "", ""
	}
	return fmt.Sprintf("  enable_cdi = true\n  cdi_spec_dirs = [%q]\n", cdiDir),
		fmt.Sprintf("      runtime_path = %q\n", filepath.Join(c.BinDir, Containerd2Dir, "containerd-shim-runc-v2"))
}

// cniConfig: pods on a bridge in the node's namespace, routed (not masqueraded) to other nodes'
// pods and to the host; %s: the pod range, host-local's data directory.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "convoy",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "%s"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "%s"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// kubeletConfig: a kubelet that authenticates the API server's client certificate against the
// cluster CA and asks the API server to authorize every request (SubjectAccessReview), as in a
// kubeadm cluster.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
# This machine has cgroup v1.
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
enforceNodeAllocatable: []
# The nodes share the machine's disk, which other work fills: what a node needs is a few hundred
# MB, not a share of the disk (1%% of 250 GB would taint both nodes with disk-pressure).
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "256Mi"
  imagefs.available: "256Mi"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
podLogsDir: %s
maxPods: 110
serializeImagePulls: false
# A Secret's new contents reach the containers that mount it at their pod's next sync. The
# operator and Kueue write their webhook certificates into mounted Secrets when they start, and
# wait for them: 10 s instead of the default minute.
syncFrequency: 10s
# The Lease is renewed every 5 s (a quarter of it), so that the controller-manager's shorter
# node-monitor-grace-period (see Options.RealNodes) still sees four renewals before it gives up.
nodeLeaseDurationSeconds: 20
`

const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  # Leave the host's conntrack table size alone.
  maxPerCore: 0
`

// cgroupControllers are the cgroup v1 hierarchies the kubelet and runc use.
func cgroupControllers() []string {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if fi, err := os.Lstat(filepath.Join("/sys/fs/cgroup", e.Name())); err == nil && fi.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// createCgroupRoot creates the node's cgroupRoot in every hierarchy: the kubelet refuses a
// cgroupRoot that does not exist. A new cpuset needs its CPUs and memory nodes before it can hold
// a task.
func createCgroupRoot(root string) error {
	for _, ctrl := range cgroupControllers() {
		dir := filepath.Join("/sys/fs/cgroup", ctrl, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if ctrl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cleanupRealNode ends what outlives the node's processes: containerd's shims and the containers,
// the mounts under the node's directory (container root filesystems, volumes, pod network
// namespaces) and the node's cgroups. It runs after Stop has ended the kubelet and containerd.
func cleanupRealNode(n *RealNode) error {
	var errs []error
	// Shims were started by containerd with its socket's path as -address.
	for _, pid := range pidsWhere(func(cmdline []string) bool {
		return len(cmdline) > 0 && strings.HasSuffix(cmdline[0], "containerd-shim-runc-v2") && slices.Contains(cmdline, n.ContainerdSocket)
	}) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Every container process lies in a cgroup below the node's cgroupRoot; kill until none is left.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := cgroupPids(filepath.Join("/sys/fs/cgroup/pids", n.CgroupRoot))
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("real node %s: processes %v still run in its cgroups", n.Name, pids))
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := unmountBelow(n.Dir); err != nil {
		errs = append(errs, err)
	}
	for _, ctrl := range cgroupControllers() {
		if err := removeCgroupTree(filepath.Join("/sys/fs/cgroup", ctrl, n.CgroupRoot)); err != nil {
			errs = append(errs, err)
		}
	}
	_ = runIP(context.Background(), "netns", "delete", n.Netns)
	removeNodeMountNS(n.MountNS)
	return errors.Join(errs...)
}

// nodeMountNSDir holds the files that keep the real nodes' mount namespaces.
const nodeMountNSDir = "/run/convoy-mnt"

// devicePluginDir is where a kubelet serves device-plugin registration, whatever its --root-dir.
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// podResourcesDir is where node agents (deploy/node-agent's DaemonSet) find the kubelet's
// PodResources socket, as on a node whose kubelet has the default --root-dir.
const podResourcesDir = "/var/lib/kubelet/pod-resources"

// DRA drivers (deploy/dra-driver's DaemonSet) register in pluginsRegistryDir and serve in
// pluginsDir, as on a node whose kubelet has the default --root-dir, and write CDI specs to cdiDir.
const (
	pluginsRegistryDir = "/var/lib/kubelet/plugins_registry"
	pluginsDir         = "/var/lib/kubelet/plugins"
	cdiDir             = "/var/run/cdi"
)

// setupNodeMountNS creates the node's mount namespace, a private copy of the host's in which
// devicePluginDir, podResourcesDir, the DRA plugin directories and cdiDir are the node's own: the
// kubelet registers device plugins at a fixed path, and each kubelet deletes every other socket
// there when it starts; a container's hostPath /var/lib/kubelet/pod-resources must reach its own
// node's kubelet, and a DRA driver's specs its own node's containerd. Processes outside reach the
// node's sockets through n.DevicePluginDir and n.PodResourcesSocket.
func setupNodeMountNS(ctx context.Context, n *RealNode) error {
	binds := [][2]string{ // host path, the node's
		{devicePluginDir, n.DevicePluginDir},
		{podResourcesDir, filepath.Dir(n.PodResourcesSocket)},
		{pluginsRegistryDir, filepath.Join(n.KubeletRootDir, "plugins_registry")},
		{pluginsDir, filepath.Join(n.KubeletRootDir, "plugins")},
		{cdiDir, n.CDIDir},
	}
	dirs := []string{nodeMountNSDir}
	var mounts []string
	for _, b := range binds {
		dirs = append(dirs, b[0], b[1])
		mounts = append(mounts, "mount --bind "+b[1]+" "+b[0])
	}
	// A namespace can be kept in a file only on a private mount; processes on other networks
	// (RealNetEnv) make it at the same time.
	script := fmt.Sprintf(`set -e
mkdir -p %[3]s
exec 9>%[1]s.lock
flock 9
mountpoint -q %[1]s || { mount --bind %[1]s %[1]s; mount --make-private %[1]s; }
if mountpoint -q %[2]s; then umount -l %[2]s; fi
touch %[2]s
unshare --mount=%[2]s --propagation private sh -c '%[4]s'
`, nodeMountNSDir, n.MountNS, strings.Join(dirs, " "), strings.Join(mounts, " && "))
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("creating the mount namespace %s: %w: %s", n.MountNS, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeNodeMountNS releases the file that keeps a node's mount namespace; the namespace and its
// mounts (root filesystems, volumes) go with its last process.
func removeNodeMountNS(file string) {
	_ = syscall.Unmount(file, syscall.MNT_DETACH)
	_ = os.Remove(file)
}

// pidsWhere returns the processes whose command line matches.
func pidsWhere(match func(cmdline []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		if match(strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupPids lists the processes in dir and every cgroup below it.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		raw, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroupTree removes dir and the cgroups below it, deepest first.
func removeCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// unmountBelow lazily unmounts every mount point at or below dir, deepest first.
func unmountBelow(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) do not occur in the paths the framework makes.
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

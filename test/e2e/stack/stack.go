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

// Package stack starts the whole Convoy stack on a local control plane from test/framework, the
// way a platform team installs it from deploy/: Convoy's and the PodGroup CRDs, the real Kueue
// manager with deploy/kueue's configuration, deploy/queue's flavors, queues and priority classes,
// and Convoy's three binaries as separate processes, each as its own ServiceAccount with exactly
// the RBAC in deploy/ (tokens from the TokenRequest API, never the admin's certificate):
//
//	convoy-operator     deploy/operator/rbac and deploy/kueue/rbac; its queue webhook registered from deploy/kueue/webhook.yaml
//	convoy-scheduler    deploy/scheduler/config.yaml and deploy/scheduler/rbac.yaml
//	convoy-node-agent   deploy/node-agent/simulator, mock NVML serving every fake node of a profile
//
// `make demo` (through `localcluster up --convoy`) and the e2e tests both start it with Start.
package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// Process and binary names of Convoy's components, and the namespace deploy/ runs them in.
const (
	Namespace = "convoy-system"
	Operator  = "convoy-operator"
	Scheduler = "convoy-scheduler"
	NodeAgent = "convoy-node-agent"
	// NodeAgentSA is the node agent simulator's ServiceAccount (deploy/node-agent/simulator).
	NodeAgentSA = "convoy-node-agent-simulator"
	// ProgressService is deploy/operator's Service of the progress endpoint.
	ProgressService = "convoy-operator-progress"
	// SimTrainer is test/cmd/simtrainer's binary and process name.
	SimTrainer = "simtrainer"
)

// Binaries are the executables Start needs in the cluster's bin directory besides the control plane's.
var Binaries = []string{Operator, Scheduler, NodeAgent, framework.KueueManager, "kubectl"}

// AgentPool is one node agent process: mock NVML with Profile for every node matching Selector.
type AgentPool struct {
	// Profile is a mock NVML profile of the node agent (h100-8, a100-8, pcie-4, ...).
	Profile string
	// Selector is a label selector of the nodes the process serves, e.g. "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3".
	Selector string
}

// Options configure Start.
type Options struct {
	// Agents are the node agent processes to run; none when empty.
	Agents []AgentPool
	// SimTrainer, when not zero, runs bin/simtrainer with this epoch interval: it reports progress
	// and checkpoints for every running gang through the operator's progress endpoint.
	SimTrainer time.Duration
	// PodNetwork is for real nodes (framework.Options.RealNodes): pods reach the progress endpoint as
	// deployed, at https://convoy-operator-progress.convoy-system.svc, a Service whose endpoint is
	// the operator's address on the node bridge.
	PodNetwork bool
	// Replicas of the operator and of the scheduler, as deploy/ runs two: each replica is a process
	// of its own with leader election on; 1 when zero. The first of each is the process Operator or
	// Scheduler, the others Operator+"-2", and so on (Replicas lists them). With more than one, the
	// API server and pods reach the operator's queue webhook and progress endpoint through a local
	// relay to whichever replica accepts the connection, as they would through their Services.
	// Not with PodNetwork.
	Replicas int
	// SpareScheduler adds a scheduler replica that Start leaves stopped, Scheduler+"-2" when
	// Replicas is 1: a test starts it with StartReplica, for example to take over from the leader.
	SpareScheduler bool
	// BookingTimeout, when not zero, replaces deploy/scheduler's GangPlacement bookingTimeoutSeconds:
	// how long the placement admission check holds an admitted gang's place for its pods.
	BookingTimeout time.Duration
	// SpotNodeLabel, when set (key=value), is the label of spot nodes in place of Karpenter's: the
	// operator's --spot-node-label, and the label of deploy/queue's spot flavors, edited as
	// docs/operations.md says.
	SpotNodeLabel string
	// TopologyPreset, when set, replaces deploy/scheduler's GangPlacement topologyLevels with
	// topologyPreset: the levels of the labels a cloud's nodes carry (gke, eks, topograph).
	TopologyPreset string
	// Log receives one line per step; nothing when nil.
	Log func(format string, args ...any)
}

// Stack is a running Convoy stack.
type Stack struct {
	Cluster *framework.Cluster
	// Root is the repository root.
	Root string
	// Kueue is the running Kueue manager.
	Kueue *framework.Kueue
	// ProgressURL is the operator's HTTPS progress endpoint.
	ProgressURL string
	// SchedulerMetricsURL is the scheduler's /metrics: its secure port, which checks a caller's
	// bearer token and access through the API server, as in a cluster (deploy/scheduler/README.md).
	SchedulerMetricsURL string
	// OperatorMetricsURL is the first operator replica's /metrics: HTTPS, checking a caller's bearer
	// token and access through the API server, as deploy/operator serves it.
	OperatorMetricsURL string
	// AgentURLs are the node agents' metrics addresses (/metrics, /faults), in Options.Agents' order.
	AgentURLs []string
	// OperatorBinary and SchedulerBinary are what StartOperator and StartScheduler run: a name in
	// the cluster's bin directory (the default, this tree's build) or a path, for example another
	// release's binaries in an upgrade test.
	OperatorBinary, SchedulerBinary string

	// replicas are the operator's and the scheduler's processes, by name.
	replicas map[string]*replica
	log      func(format string, args ...any)
}

// replica is one process of the operator or the scheduler.
type replica struct {
	operator  bool
	args, env []string
	ready     string
}

// Start installs deploy/ on c and starts Kueue and Convoy's components; they run until c stops.
func Start(ctx context.Context, c *framework.Cluster, opts Options) (*Stack, error) {
	if err := framework.CheckBinaries(c.BinDir, Binaries...); err != nil {
		return nil, err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	s := &Stack{Cluster: c, Root: root, log: opts.Log, replicas: map[string]*replica{}}
	replicas := max(opts.Replicas, 1)
	if replicas > 1 && opts.PodNetwork {
		return nil, errors.New("stack: Replicas with PodNetwork: pods would reach one replica's progress endpoint only")
	}
	if s.log == nil {
		s.log = func(string, ...any) {}
	}
	began := time.Now()

	pluginsDir, err := goListModuleDir(ctx, root, "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return nil, err
	}
	if err := c.InstallCRDs(ctx, s.path("deploy/crd/bases"), filepath.Join(pluginsDir, "config/crd/bases")); err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	s.log("CRDs installed (%.1fs)", time.Since(began).Seconds())

	if s.Kueue, err = c.StartKueue(ctx, framework.KueueOptions{ConfigFile: s.path("deploy/kueue/controller_manager_config.yaml")}); err != nil {
		return nil, err
	}
	s.log("Kueue %s ready (%.1fs)", framework.KueueVersion, time.Since(began).Seconds())

	// What `kubectl apply -k deploy/...` would install, less the Deployments this stack replaces
	// with local processes and Kueue's release manifests StartKueue installed.
	for _, args := range [][]string{
		{"-k", s.path("deploy/operator/rbac")},
		{"-f", s.path("deploy/kueue/rbac")},
		{"-f", s.path("deploy/kueue/kueue_trainingjob_role.yaml")},
		{"-f", s.path("deploy/scheduler/rbac.yaml")},
		{"-k", s.path("deploy/node-agent/simulator")},
	} {
		if _, err := s.Kubectl(ctx, append([]string{"apply", "--server-side", "--force-conflicts"}, args...)...); err != nil {
			return nil, err
		}
	}
	if err := s.applyQueues(ctx, opts.SpotNodeLabel); err != nil {
		return nil, err
	}
	s.log("deploy/ RBAC, queues and priority classes applied (%.1fs)", time.Since(began).Seconds())

	if err := s.setupOperator(ctx, opts.PodNetwork, replicas, opts.SpotNodeLabel); err != nil {
		return nil, err
	}
	schedulers := replicas
	if opts.SpareScheduler {
		schedulers++
	}
	if err := s.setupScheduler(ctx, schedulers, opts.BookingTimeout, opts.TopologyPreset); err != nil {
		return nil, err
	}
	for _, names := range [][]string{s.Replicas(Operator), s.Replicas(Scheduler)[:replicas]} {
		for _, name := range names {
			if err := s.StartReplica(ctx, name); err != nil {
				return nil, err
			}
			s.log("%s ready (%.1fs)", name, time.Since(began).Seconds())
		}
	}
	if err := s.startAgents(ctx, opts.Agents); err != nil {
		return nil, err
	}
	s.log("Node agents ready (%.1fs)", time.Since(began).Seconds())
	if opts.SimTrainer > 0 {
		// It acts for the pods (it mints their tokens), so it runs as the administrator.
		args := []string{"--kubeconfig=" + c.KubeconfigPath, "--epoch-interval=" + opts.SimTrainer.String()}
		if err := c.StartProcess(SimTrainer, SimTrainer, args, nil); err != nil {
			return nil, err
		}
	}
	go s.supervise()
	return s, nil
}

// supervise starts again, within a second, an operator or scheduler replica that exited on its
// own, as its Deployment's kubelet would, until the cluster stops: a replica whose Lease renewal
// misses its renew deadline (the API server stalled on a loaded machine) exits, as kube-scheduler
// does. A replica a test stops or kills is left alone (framework.Cluster.RestartIfExited).
func (s *Stack) supervise() {
	for !s.Cluster.Stopped() {
		time.Sleep(time.Second)
		for name := range s.replicas {
			switch restarted, err := s.Cluster.RestartIfExited(name); {
			case err != nil:
				s.log("restarting %s, which exited on its own: %v", name, err)
			case restarted:
				s.log("%s exited on its own (see its log); started again, as a kubelet would", name)
			}
		}
	}
}

// setupOperator writes the operator's ServiceAccount kubeconfig and webhook certificate, and its
// command line with loopback addresses.
func (s *Stack) setupOperator(ctx context.Context, podNetwork bool, replicas int, spotNodeLabel string) error {
	c := s.Cluster
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, Namespace, Operator)
	if err != nil {
		return err
	}
	// Each replica's metrics, probe, progress and webhook ports, then the relays' two.
	ports, err := framework.FreePorts(4*replicas + 2)
	if err != nil {
		return err
	}
	certDir := filepath.Join(c.StateDir, "operator-webhook")
	caPEM, err := c.IssueServingCertificate("convoy-operator-queue-webhook", certDir)
	if err != nil {
		return err
	}
	progressPort, webhookPort := ports[2], ports[3]
	if replicas > 1 {
		progressPort, webhookPort = ports[4*replicas], ports[4*replicas+1]
	}
	s.ProgressURL = "https://" + hostPort(progressPort)
	progressAddr := hostPort(progressPort)
	if podNetwork {
		progressAddr = net.JoinHostPort(framework.NodeGatewayIP, strconv.Itoa(progressPort))
		s.ProgressURL = "https://" + ProgressService + "." + Namespace + ".svc:443"
		if err := c.ExposeHostService(ctx, Namespace, ProgressService, 443, progressPort); err != nil {
			return err
		}
	}
	leaderElection, err := s.deployedLeaderElection()
	if err != nil {
		return err
	}
	if spotNodeLabel != "" {
		leaderElection = append(leaderElection, "--spot-node-label="+spotNodeLabel)
	}
	var progressBackends, webhookBackends []string
	for i := range replicas {
		p := ports[4*i : 4*i+4]
		if i == 0 {
			s.OperatorMetricsURL = "https://" + hostPort(p[0]) + "/metrics"
		}
		progress := hostPort(p[2])
		if replicas == 1 {
			progress = progressAddr
		}
		progressBackends = append(progressBackends, hostPort(p[2]))
		webhookBackends = append(webhookBackends, hostPort(p[3]))
		s.replicas[replicaName(Operator, i)] = &replica{
			operator: true,
			ready:    "http://" + hostPort(p[1]) + "/readyz",
			env:      []string{"KUBECONFIG=" + kubeconfig},
			args: append([]string{
				"--namespace=" + Namespace,
				"--kueue=true",
				"--metrics-bind-address=" + hostPort(p[0]),
				"--health-probe-bind-address=" + hostPort(p[1]),
				"--progress-bind-address=" + progress,
				"--progress-url=" + s.ProgressURL,
				"--queue-webhook-bind-address=" + hostPort(p[3]),
				"--queue-webhook-cert-dir=" + certDir,
			}, leaderElection...),
		}
	}
	if replicas > 1 {
		for addr, backends := range map[string][]string{progressAddr: progressBackends, hostPort(webhookPort): webhookBackends} {
			if err := relay(addr, backends); err != nil {
				return err
			}
		}
	}
	webhooks, err := os.ReadFile(s.path("deploy/kueue/webhook.yaml"))
	if err != nil {
		return err
	}
	return c.ApplyLocalWebhooks(ctx, webhooks, "https://"+hostPort(webhookPort), caPEM, nil)
}

// deployedLeaderElection returns the operator's --leader-elect flags in deploy/operator/manager.yaml,
// so that a standby takes over from a crashed leader as soon as in a cluster, and its flags that say
// which jobs are Kueue's (--kueue-manage-jobs-without-queue-name, ...), so that it applies the rule
// of the Kueue that runs with deploy/kueue's configuration.
func (s *Stack) deployedLeaderElection() ([]string, error) {
	data, err := os.ReadFile(s.path("deploy/operator/manager.yaml"))
	if err != nil {
		return nil, err
	}
	var flags []string
	for _, doc := range strings.Split(string(data), "\n---") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			return nil, fmt.Errorf("deploy/operator/manager.yaml: %w", err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, arg := range c.Args {
				if strings.HasPrefix(arg, "--leader-elect") || strings.HasPrefix(arg, "--kueue-manage") || strings.HasPrefix(arg, "--kueue-feature-gates") {
					flags = append(flags, arg)
				}
			}
		}
	}
	if len(flags) == 0 {
		return nil, errors.New("deploy/operator/manager.yaml: no --leader-elect flag in the operator's Deployment")
	}
	return flags, nil
}

// applyQueues applies deploy/queue, its spot flavors selecting spotNodeLabel (key=value) in place of
// Karpenter's label when it is set, as an administrator edits deploy/queue/flavors.yaml.
func (s *Stack) applyQueues(ctx context.Context, spotNodeLabel string) error {
	apply := []string{"apply", "--server-side", "--force-conflicts"}
	if spotNodeLabel == "" {
		_, err := s.Kubectl(ctx, append(apply, "-k", s.path("deploy/queue"))...)
		return err
	}
	l, err := convoy.ParseSpotNodeLabel(spotNodeLabel)
	if err != nil {
		return err
	}
	out, err := s.Kubectl(ctx, "kustomize", s.path("deploy/queue"))
	if err != nil {
		return err
	}
	karpenter := convoy.DefaultSpotNodeLabel.Key + ": " + convoy.DefaultSpotNodeLabel.Value
	if !strings.Contains(out, karpenter) {
		return fmt.Errorf("deploy/queue: no spot flavor selects %s", karpenter)
	}
	path := filepath.Join(s.Cluster.StateDir, "queues.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(out, karpenter, l.Key+": "+strconv.Quote(l.Value))), 0o644); err != nil {
		return err
	}
	_, err = s.Kubectl(ctx, append(apply, "-f", path)...)
	return err
}

// replicaName is the process name of replica i (from 0) of component.
func replicaName(component string, i int) string {
	if i == 0 {
		return component
	}
	return fmt.Sprintf("%s-%d", component, i+1)
}

// Replicas returns the process names of component's replicas (Operator or Scheduler), the first
// one first.
func (s *Stack) Replicas(component string) []string {
	var names []string
	for i := 0; s.replicas[replicaName(component, i)] != nil; i++ {
		names = append(names, replicaName(component, i))
	}
	return names
}

// StartReplica starts the operator's or the scheduler's replica called name (see Replicas) and
// waits until it is ready. Leader election keeps a replica restarted after a crash waiting until
// the previous leader's Lease expires.
func (s *Stack) StartReplica(ctx context.Context, name string) error {
	r := s.replicas[name]
	if r == nil {
		return fmt.Errorf("stack: no replica named %q", name)
	}
	binary := cmp.Or(s.SchedulerBinary, Scheduler)
	if r.operator {
		binary = cmp.Or(s.OperatorBinary, Operator)
	}
	if err := s.Cluster.StartProcess(name, binary, r.args, r.env); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return s.Cluster.WaitHealthy(ctx, name, r.ready)
}

// StartOperator starts the operator process and waits until it is ready. Its leader election
// keeps a restarted operator waiting until the previous one's Lease expires.
func (s *Stack) StartOperator(ctx context.Context) error { return s.StartReplica(ctx, Operator) }

// StopOperator stops the operator gracefully (SIGTERM).
func (s *Stack) StopOperator() error { return s.Cluster.StopProcess(Operator) }

// setupScheduler writes deploy/scheduler/config.yaml with the scheduler's ServiceAccount
// kubeconfig; leader election stays on, as deployed.
func (s *Stack) setupScheduler(ctx context.Context, replicas int, bookingTimeout time.Duration, preset string) error {
	c := s.Cluster
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, Namespace, Scheduler)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(s.path("deploy/scheduler/config.yaml"))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return err
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		pcs, _ := p.(map[string]any)["pluginConfig"].([]any)
		for _, pc := range pcs {
			if pc := pc.(map[string]any); pc["name"] == "GangPlacement" {
				args := pc["args"].(map[string]any)
				if bookingTimeout > 0 {
					args["bookingTimeoutSeconds"] = int64(bookingTimeout.Seconds())
				}
				if preset != "" {
					delete(args, "topologyLevels")
					args["topologyPreset"] = preset
				}
			}
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(c.StateDir, "convoy-scheduler.yaml")
	if err := os.WriteFile(cfgPath, out, 0o644); err != nil {
		return err
	}
	ports, err := framework.FreePorts(replicas)
	if err != nil {
		return err
	}
	s.SchedulerMetricsURL = "https://" + hostPort(ports[0]) + "/metrics"
	for i, port := range ports {
		// The ServiceAccount's kubeconfig also checks callers of the secure port, as the in-cluster
		// config does in a Deployment.
		s.replicas[replicaName(Scheduler, i)] = &replica{
			ready: "https://" + hostPort(port) + "/readyz",
			args: []string{"--config=" + cfgPath, "--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--v=2",
				"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig},
		}
	}
	return nil
}

// StartSchedulerAlone runs convoy-scheduler on c, whose Kueue and operator run otherwise (for
// example test/util/queuetest's): deploy/scheduler's RBAC and configuration, one replica, ready when
// it returns. Its placement admission check serves deploy/queue's convoy-placement; it stops with c.
func StartSchedulerAlone(ctx context.Context, c *framework.Cluster) (*Stack, error) {
	if err := framework.CheckBinaries(c.BinDir, Scheduler, "kubectl"); err != nil {
		return nil, err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	s := &Stack{Cluster: c, Root: root, log: func(string, ...any) {}, replicas: map[string]*replica{}}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := s.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", s.path("deploy/scheduler/rbac.yaml")); err != nil {
		return nil, err
	}
	if err := s.setupScheduler(ctx, 1, 0, ""); err != nil {
		return nil, err
	}
	return s, s.StartScheduler(ctx)
}

// StartScheduler starts the scheduler process and waits until it is ready.
func (s *Stack) StartScheduler(ctx context.Context) error { return s.StartReplica(ctx, Scheduler) }

// StopScheduler stops the scheduler gracefully (SIGTERM).
func (s *Stack) StopScheduler() error { return s.Cluster.StopProcess(Scheduler) }

// AgentProcess is the process name of the node agent of the pool of profile.
func AgentProcess(profile string) string { return NodeAgent + "-" + profile }

// startAgents starts one node agent per pool, as the simulator's ServiceAccount.
func (s *Stack) startAgents(ctx context.Context, pools []AgentPool) error {
	for _, p := range pools {
		if err := s.StartAgent(ctx, AgentProcess(p.Profile),
			"--nvml=mock:"+p.Profile, "--node-selector="+p.Selector, "--kube-api-qps=100", "--kube-api-burst=200"); err != nil {
			return err
		}
	}
	return nil
}

// StartAgent starts a node agent process called name with args, as the simulator's ServiceAccount
// and with its metrics on a free loopback port, waits until it is healthy and adds its address to
// AgentURLs.
func (s *Stack) StartAgent(ctx context.Context, name string, args ...string) error {
	c := s.Cluster
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, Namespace, NodeAgentSA)
	if err != nil {
		return err
	}
	ports, err := framework.FreePorts(1)
	if err != nil {
		return err
	}
	addr := hostPort(ports[0])
	if err := c.StartProcess(name, NodeAgent, append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + addr}, args...), nil); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitHealthy(wctx, name, "http://"+addr+"/healthz"); err != nil {
		return err
	}
	s.AgentURLs = append(s.AgentURLs, "http://"+addr)
	return nil
}

// Kubectl runs bin/kubectl as the cluster's administrator and returns its combined output.
// kubectl finds its plugins (kubectl-kueue) in bin/.
func (s *Stack) Kubectl(ctx context.Context, args ...string) (string, error) {
	return util.Kubectl(ctx, s.Cluster, args...)
}

func (s *Stack) path(rel string) string { return filepath.Join(s.Root, filepath.FromSlash(rel)) }

func goListModuleDir(ctx context.Context, root, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// LabelCapacityType is the node label deploy/queue's spot ResourceFlavors select.
const LabelCapacityType = "karpenter.sh/capacity-type"

// PCIeProduct is the nvidia.com/gpu.product of PCIeRack's nodes, which the pcie-4 mock profile imitates.
const PCIeProduct = "NVIDIA-L40S"

// PCIeRack returns n on-demand nodes of 4 PCIe L40S GPUs in one rack of their own, rack-pcie.
func PCIeRack(n int) []framework.NodeSpec {
	var specs []framework.NodeSpec
	for i := range n {
		specs = append(specs, framework.NodeSpec{
			Name: fmt.Sprintf("pcie-%d", i), GPUs: 4, GPUProduct: PCIeProduct, CPU: "64", Memory: "512Gi",
			Zone: "zone-0", Block: "block-pcie", Rack: "rack-pcie",
			Labels: map[string]string{LabelCapacityType: "on-demand"},
		})
	}
	return specs
}

// ProfileFor returns the mock NVML profile that imitates a nvidia.com/gpu.product.
func ProfileFor(product string) string {
	switch {
	case strings.Contains(product, "A100"):
		return "a100-8"
	case strings.Contains(product, "L40S"):
		return "pcie-4"
	}
	return "h100-8"
}

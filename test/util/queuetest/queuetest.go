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

// Package queuetest starts what the queue integration's tests and benchmarks share on a local
// cluster from test/framework: the real Kueue manager with deploy/kueue's configuration, and the
// operator with the queue integration, built by operator.New as the binary builds it, run in the
// calling process as the convoy-operator ServiceAccount with the generated RBAC, its webhook
// registered from deploy/kueue/webhook.yaml.
package queuetest

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/queue"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// The operator's namespace and ServiceAccount, as deploy/ names them.
const (
	OperatorNamespace = "convoy-system"
	OperatorSA        = "convoy-operator"
)

// Options configure Start.
type Options struct {
	// WrapClient, when set, wraps the operator's client.
	WrapClient func(client.Client) client.Client
	// LogLevel is the operator's zap level; its log is <StateDir>/logs/operator.log.
	LogLevel zapcore.Level
	// QPS and Burst limit the operator's requests, 100 and 200 (the binary's defaults) when zero.
	QPS   float32
	Burst int
	// ReclaimNotice is the operator's reclaim notice (controller.DefaultReclaimNotice when zero).
	ReclaimNotice controller.ReclaimNotice
	// SkipNameValidation lets the process start the operator on more than one cluster.
	SkipNameValidation bool
	// KueueConfig is Kueue's configuration file, deploy/kueue/controller_manager_config.yaml
	// when empty.
	KueueConfig string
}

// Env is a running Kueue and operator.
type Env struct {
	Cluster *framework.Cluster
	// Root is the repository root.
	Root string
	// ProgressURL is the operator's progress endpoint.
	ProgressURL string
	// Kueue is the running Kueue manager.
	Kueue *framework.Kueue

	stopOperator context.CancelFunc
	operatorDone chan struct{}
}

// Stop stops the operator and waits for it; Kueue stops with the cluster.
func (e *Env) Stop() {
	if e.stopOperator != nil {
		e.stopOperator()
		<-e.operatorDone
	}
}

var setLoggerOnce sync.Once

// Start installs Convoy's and the PodGroup CRDs, runs Kueue and the operator, and returns once the
// operator's webhook answers. ctx bounds the start only; the operator runs until Stop or the end of
// the process.
func Start(ctx context.Context, c *framework.Cluster, opts Options) (*Env, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{Cluster: c, Root: root}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the scheduler-plugins module for its PodGroup CRD: %w", err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy/crd/bases"), filepath.Join(strings.TrimSpace(string(out)), "config/crd/bases")); err != nil {
		return nil, err
	}
	kueueConfig := cmp.Or(opts.KueueConfig, filepath.Join(root, "deploy/kueue/controller_manager_config.yaml"))
	if e.Kueue, err = c.StartKueue(ctx, framework.KueueOptions{ConfigFile: kueueConfig}); err != nil {
		return nil, err
	}
	if out, err := e.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(root, "deploy/kueue/kueue_trainingjob_role.yaml")); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: OperatorSA}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	for _, file := range []string{"deploy/operator/rbac/role.yaml", "deploy/operator/rbac/named_role.yaml", "deploy/kueue/rbac/role.yaml", "deploy/kueue/rbac/named_role.yaml"} {
		if err := framework.BindRoles(ctx, c.Client, filepath.Join(root, file), OperatorNamespace, OperatorSA); err != nil {
			return nil, err
		}
	}

	webhookAddr, err := util.FreeAddr()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(c.StateDir, "operator-webhook")
	caPEM, err := c.IssueServingCertificate("convoy-operator-queue-webhook", certDir)
	if err != nil {
		return nil, err
	}
	management, err := kueueManagement(kueueConfig)
	if err != nil {
		return nil, err
	}
	if err := e.startOperator(ctx, opts, queue.New(queue.Options{WebhookAddr: webhookAddr, WebhookCertDir: certDir, Management: management})); err != nil {
		return nil, err
	}
	if err := waitTLS(ctx, webhookAddr, caPEM); err != nil {
		return nil, fmt.Errorf("waiting for the operator's queue webhook: %w", err)
	}
	webhooks, err := os.ReadFile(filepath.Join(root, "deploy/kueue/webhook.yaml"))
	if err != nil {
		return nil, err
	}
	if err := c.ApplyLocalWebhooks(ctx, webhooks, "https://"+webhookAddr, caPEM, nil); err != nil {
		return nil, err
	}
	return e, nil
}

// StartShared starts Kueue and the operator (Start) on the package's shared cluster
// (framework.Shared) and stops the operator at the end of tb, failing tb when they do not start.
func StartShared(tb testing.TB, opts Options) *Env {
	tb.Helper()
	env, err := Start(tb.Context(), framework.Shared(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.Stop)
	return env
}

// kueueManagement is which jobs Kueue's configuration in file makes Kueue's, as deploy/operator's
// flags tell the operator; it sets the configuration's feature gates in this process, where the
// operator runs Kueue's job reconciler.
func kueueManagement(file string) (queue.Management, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return queue.Management{}, err
	}
	cfg := &configapi.Configuration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return queue.Management{}, fmt.Errorf("%s: %w", file, err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return queue.Management{}, fmt.Errorf("%s: featureGates: %w", file, err)
	}
	return queue.ManagementOf(cfg)
}

// startOperator runs the operator in this process, as its ServiceAccount, until ctx ends.
func (e *Env) startOperator(ctx context.Context, opts Options, q controller.Queue) error {
	c := e.Cluster
	cfg, err := c.ServiceAccountConfig(ctx, OperatorNamespace, OperatorSA)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	if opts.QPS > 0 {
		cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.ProgressURL = "https://" + l.Addr().String()
	var logErr error
	setLoggerOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(c.StateDir, "logs", "operator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			logErr = err
			return
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.Level(opts.LogLevel)))
	})
	if logErr != nil {
		return logErr
	}
	mgr, err := operator.New(ctx, cfg, operator.Options{
		Namespace:        OperatorNamespace,
		MetricsAddr:      "0",
		ProbeAddr:        "0",
		ProgressListener: l,
		ProgressURL:      e.ProgressURL,
		Backoff:          controller.Backoff{Base: time.Second, Max: 2 * time.Second},
		WrapClient:       opts.WrapClient,
		Queue:            q,
		ReclaimNotice:    opts.ReclaimNotice,
		// More than one cluster's operator may run in the process.
		SkipNameValidation: opts.SkipNameValidation,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.stopOperator, e.operatorDone = cancel, make(chan struct{})
	go func() {
		defer close(e.operatorDone)
		if err := mgr.Start(runCtx); err != nil {
			fmt.Fprintf(os.Stderr, "the operator stopped: %v\n", err)
		}
	}()
	return nil
}

// Kubectl runs kubectl as the cluster's admin (util.Kubectl).
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return util.Kubectl(ctx, e.Cluster, args...)
}

// waitTLS waits until a TLS server with a certificate from caPEM answers at addr.
func waitTLS(ctx context.Context, addr string, caPEM []byte) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
}

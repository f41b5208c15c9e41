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

package chaos

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookDelay is how long the slow webhook takes to admit a pod, within its timeoutSeconds of 10.
const webhookDelay = 9 * time.Second

// SlowWebhook runs jobs while a validating webhook on pods CREATE in their namespace takes 9 s to
// admit each pod (timeoutSeconds 10, failurePolicy Fail): a slow policy engine. Nothing may be lost
// or stuck, and every pod of every gang passes through it.
func (r *Runner) SlowWebhook(ctx context.Context) ([]Result, error) {
	const ns = "chaos-slow-webhook"
	res := Result{Scenario: "slow webhook", Target: "every pod admitted through the webhook; " + allZero}
	if err := r.queue(ctx, ns); err != nil {
		return []Result{res}, err
	}
	calls, stop, err := r.startSlowWebhook(ctx, ns)
	if err != nil {
		return []Result{res}, err
	}
	defer stop()
	began := time.Now()
	names, err := r.createJobs(ctx, ns, "slow", r.cfg.WebhookJobs)
	if err != nil {
		return []Result{res}, err
	}
	out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
	if err != nil {
		return []Result{res}, err
	}
	created := 0
	for _, name := range names {
		created += len(r.w.createdPods(ns, name))
	}
	res.Faults = fmt.Sprintf("a pod admission webhook taking %s of its 10 s timeout; %d pod creations admitted through it", seconds(webhookDelay), calls.Load())
	res.Jobs = len(names)
	res.Times = fmt.Sprintf("all done in %s", seconds(out.done))
	res = r.row(res, ns, out)
	if int(calls.Load()) < created {
		res.Missed = fmt.Sprintf("the webhook admitted %d pod creations, of %d pods created", calls.Load(), created)
	}
	return []Result{res}, nil
}

// startSlowWebhook serves, on a loopback port, a validating webhook that admits every pod after
// webhookDelay, registers it for pods CREATE in namespace ns and waits until the API server calls
// it. It returns the count of pod creations (dry runs left out) it admitted, and a function that
// removes it.
func (r *Runner) startSlowWebhook(ctx context.Context, ns string) (*atomic.Int64, func(), error) {
	dir := filepath.Join(r.c.StateDir, "chaos-slow-webhook")
	caPEM, err := r.c.IssueServingCertificate("chaos-slow-webhook", dir)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, nil, err
	}
	calls, dryRuns := &atomic.Int64{}, &atomic.Int64{}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(req.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		time.Sleep(webhookDelay)
		if ptr.Deref(review.Request.DryRun, false) {
			dryRuns.Add(1)
		} else {
			calls.Add(1)
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})}
	go func() { _ = srv.Serve(ln) }()
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "slow.chaos.convoy.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://" + ln.Addr().(*net.TCPAddr).String() + "/validate"), CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	stop := func() {
		_ = r.k.Delete(context.Background(), hook)
		_ = srv.Close()
	}
	if err := r.k.Create(ctx, hook); err != nil {
		stop()
		return nil, nil, err
	}
	// The API server calls a new webhook once its informer has it: a dry-run pod proves it.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}
	err = retry(ctx, time.Minute, func() error {
		if err := r.k.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return err
		}
		if dryRuns.Load() == 0 {
			return errors.New("the API server has not called the slow webhook yet")
		}
		return nil
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return calls, stop, nil
}

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

package queuetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
)

// Report posts body to the pod's CONVOY_PROGRESS_URL/kind ("progress" or "checkpoint") as the
// pod's training code would: with a token for the pod of the progress audience, trusting the CA in
// the job's ConfigMap. It returns the operator's reply (empty for 204), or an error unless the
// report was recorded.
func (e *Env) Report(ctx context.Context, pod *corev1.Pod, kind string, body any) (progress.Reply, error) {
	var reply progress.Reply
	tr, err := e.Cluster.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, "default", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			Audiences:         []string{progress.Audience},
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return reply, err
	}
	cm := &corev1.ConfigMap{}
	if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Labels[convoy.LabelJobName] + "-config"}, cm); err != nil {
		return reply, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["progress-ca.crt"])) {
		return reply, fmt.Errorf("ConfigMap %s holds no progress CA", cm.Name)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return reply, err
	}
	var url string
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == "CONVOY_PROGRESS_URL" {
			url = v.Value
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/"+kind, bytes.NewReader(data))
	if err != nil {
		return reply, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Do(req)
	if err != nil {
		return reply, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return reply, nil
	case http.StatusOK:
		if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
			return reply, fmt.Errorf("POST %s from %s: the reply is not a progress.Reply: %w", kind, pod.Name, err)
		}
		return reply, nil
	}
	answer, _ := io.ReadAll(resp.Body)
	return reply, fmt.Errorf("POST %s from %s = %s %s, want 204 or 200", kind, pod.Name, resp.Status, answer)
}

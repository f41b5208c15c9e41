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

package util

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWriteRetriedOnlyWhileItsWebhookIsUnreachable: a write refused because the API server could
// not reach a webhook is tried again until it goes through; a webhook's denial is returned at once.
func TestWriteRetriedOnlyWhileItsWebhookIsUnreachable(t *testing.T) {
	refused := apierrors.NewInternalError(errors.New(`failed calling webhook "mtrainingjob.queue.convoy.dev": failed to call webhook: ` +
		`Post "https://127.0.0.1:28730/mutate-convoy-dev-v1alpha1-trainingjob?timeout=10s": dial tcp 127.0.0.1:28730: connect: connection refused`))
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "convoy.dev", Resource: "trainingjobs"}, "llm",
		errors.New(`admission webhook "vtrainingjob.queue.convoy.dev" denied the request: spec.numWorkers: must be at least 1`))

	calls := 0
	err := retryUnreachableWebhook(func() error {
		if calls++; calls < 3 {
			return refused
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("a write refused twice for an unreachable webhook: err %v after %d calls, want nil after 3", err, calls)
	}

	calls = 0
	err = retryUnreachableWebhook(func() error { calls++; return denied })
	if !apierrors.IsForbidden(err) || calls != 1 {
		t.Errorf("a write a webhook denied: err %v after %d calls, want the denial after 1", err, calls)
	}
	if WebhookUnreachable(apierrors.NewInternalError(errors.New("etcdserver: request timed out"))) {
		t.Error("an internal error that names no webhook counted as an unreachable webhook")
	}
}

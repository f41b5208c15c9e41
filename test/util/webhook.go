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
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookRetry retries a write whose webhook could not be reached every 200 ms for 30 s: a replica
// that its supervisor starts again (test/e2e/stack) serves within seconds.
var webhookRetry = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1, Steps: 150}

// WebhookRetrying is c with its writes tried again, for up to webhookRetry, while the API server
// cannot reach a webhook they call (refused, timed out): the operator serves Convoy's webhooks, and
// when a stalled machine makes it lose its Lease it exits and starts again, as a pod would, while
// a write in between is refused as a client in a cluster would see it, and would try again. A
// webhook's answer (a denial) is returned at once.
func WebhookRetrying(c client.Client) client.Client { return webhookRetrying{c} }

type webhookRetrying struct{ client.Client }

func (c webhookRetrying) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return retryUnreachableWebhook(func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c webhookRetrying) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return retryUnreachableWebhook(func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c webhookRetrying) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return retryUnreachableWebhook(func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

// retryUnreachableWebhook calls write until it returns anything but an unreachable webhook's
// error, or webhookRetry has run out.
func retryUnreachableWebhook(write func() error) error {
	return retry.OnError(webhookRetry, WebhookUnreachable, write)
}

// WebhookUnreachable reports whether err is the API server's refusal of a write because a webhook
// it calls could not be reached or did not answer in time; the webhook itself refused nothing.
func WebhookUnreachable(err error) bool {
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") &&
		(strings.Contains(msg, "connection refused") || strings.Contains(msg, "context deadline exceeded") ||
			strings.Contains(msg, "Client.Timeout exceeded") || strings.Contains(msg, "no endpoints available"))
}

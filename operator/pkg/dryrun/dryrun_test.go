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

package dryrun

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/convoy-dev/convoy/operator/pkg/builder"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestCheckWarnsOfDryRunsUnansweredWithinItsContext: behind an admission webhook on pods that does
// not answer before the caller's context ends, the pods' dry runs are warnings, not errors, and
// the other children are still checked.
func TestCheckWarnsOfDryRunsUnansweredWithinItsContext(t *testing.T) {
	var others atomic.Int32
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				<-ctx.Done()
				return ctx.Err()
			}
			others.Add(1)
			return nil
		},
	}).Build()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res := Check(ctx, c, utiltesting.MakeTrainingJob("llm", "ns").Workers(4).Obj(), builder.Options{})
	if len(res.Errors) > 0 {
		t.Errorf("errors: %v; want none", res.Errors)
	}
	pods := 0
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, "Pod ") && strings.Contains(w, "could not be checked with a dry run") {
			pods++
		}
	}
	if pods != 2 || others.Load() == 0 {
		t.Errorf("warnings %q, %d other children checked; want a warning for each of the 2 pods checked, and the other children checked", res.Warnings, others.Load())
	}
}

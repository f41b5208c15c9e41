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

package gangcore

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// TestSharedStateGoesWithItsProfiles: the profiles of one scheduler share one State, which stays
// registered while one of them runs, and is stopped and dropped once the last one's context ends
// or its framework releases it.
func TestSharedStateGoesWithItsProfiles(t *testing.T) {
	metrics.Register()
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	empty := &snapshot{cur: cache.NewEmptySnapshot()}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	a := profile(ctxA, t, "profile-a", cs, factory, empty, &activator{})
	b := profile(ctxB, t, "profile-b", cs, factory, empty, &activator{})

	s, err := Shared(ctxA, a, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Shared(ctxB, b, testOptions()); err != nil || got != s {
		t.Fatalf("the second profile got State %p (err %v), want the first profile's %p", got, err, s)
	}
	other := testOptions()
	other.Levels = []TopologyLevel{{"rack", "example.com/rack"}}
	if _, err := Shared(ctxB, b, other); err == nil || !strings.Contains(err.Error(), "give every profile the same GangPlacementArgs") {
		t.Errorf("Shared with other args: err %v, want one that asks for the same args", err)
	}

	cancelA()
	gone := func(h fwk.Handle) bool {
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
			func(context.Context) (bool, error) { return Lookup(h) == nil, nil })
		return err == nil
	}
	// The other profile still runs: the State with it, though the context it was made under ended.
	time.Sleep(100 * time.Millisecond)
	if Lookup(b) != s {
		t.Fatal("the State was dropped while a profile still holds it")
	}
	select {
	case <-s.done:
		t.Fatal("the State stopped while a profile still holds it")
	default:
	}

	Release(b)
	if !gone(b) {
		t.Fatal("the State is still registered after its last profile released it")
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the State still runs after its last profile released it")
	}

	// A scheduler made again on the same client set gets a State of its own, which goes with the
	// context of its only profile.
	ctxC, cancelC := context.WithCancel(context.Background())
	c := profile(ctxC, t, "profile-c", cs, factory, empty, &activator{})
	s2, err := Shared(ctxC, c, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s2 == s {
		t.Fatal("a new profile got the stopped State")
	}
	cancelC()
	if !gone(c) {
		t.Fatal("the State is still registered after its only profile's context ended")
	}
}

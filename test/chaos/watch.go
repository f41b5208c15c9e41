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
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// labelPodGroup is scheduler-plugins' pod label naming a pod's PodGroup.
const labelPodGroup = "scheduling.x-k8s.io/pod-group"

// podKey is one member of one attempt of a gang: a pod created again with the same key was
// recreated within its attempt.
type podKey struct{ ns, gang, role, rank, attempt string }

// gangKey is one attempt of a gang.
type gangKey struct{ ns, gang, attempt string }

// watcher follows every pod of the cluster from an informer, as it changes, and counts what a user
// must never see: two pods of one gang alive at once that must never be (duplicates: two of the same
// role and rank, whatever their names, or two of different restart attempts, as when a new attempt
// starts while a pod of the old one still runs), a pod created again within an attempt (recreated),
// and a gang with some but not all of its pods bound for longer than grace (partial).
type watcher struct {
	grace time.Duration

	mu sync.Mutex
	// expected is the number of pods of each gang, by namespace/name, as the runner created it.
	expected map[types.NamespacedName]int
	pods     map[types.UID]*corev1.Pod
	// created is every pod UID ever seen for a key.
	created map[podKey]map[types.UID]bool
	// live are each gang's pods alive now; seen orders pods by when the watcher first saw them.
	live map[types.NamespacedName]map[types.UID]*corev1.Pod
	seen map[types.UID]int
	// dups are the pods that were alive beside an older one they must not be beside, with why.
	dups map[types.UID]string
	// partialSince is when each gang attempt became partly bound; partial the ones that stayed so
	// longer than grace; longest the longest time any was.
	partialSince map[gangKey]time.Time
	partial      map[gangKey]bool
	longest      map[string]time.Duration
	// bound lists, per gang, every bound pod seen (by UID), for the Permit timeout's count.
	bound map[types.NamespacedName]map[types.UID]bool
	// onBind runs, outside the lock, for each pod of a gang seen bound for the first time.
	onBind func(gang types.NamespacedName, bound int)
}

func newWatcher(grace time.Duration) *watcher {
	return &watcher{
		grace:        grace,
		expected:     map[types.NamespacedName]int{},
		pods:         map[types.UID]*corev1.Pod{},
		created:      map[podKey]map[types.UID]bool{},
		live:         map[types.NamespacedName]map[types.UID]*corev1.Pod{},
		seen:         map[types.UID]int{},
		dups:         map[types.UID]string{},
		partialSince: map[gangKey]time.Time{},
		partial:      map[gangKey]bool{},
		longest:      map[string]time.Duration{},
		bound:        map[types.NamespacedName]map[types.UID]bool{},
	}
}

// run watches pods until ctx ends; it returns once the informer has synced.
func (w *watcher) run(ctx context.Context, cs kubernetes.Interface) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { w.update(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.remove(p)
			}
		},
	})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				w.checkPartial(now)
			}
		}
	}()
}

// expect registers a gang of n pods; pods of gangs not registered are ignored.
func (w *watcher) expect(ns, gang string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expected[types.NamespacedName{Namespace: ns, Name: gang}] = n
}

// gangOf returns the gang of a TrainingJob's pod (its job) or of a pod of a PodGroup.
func gangOf(p *corev1.Pod) string {
	if g := p.Labels[convoy.LabelJobName]; g != "" {
		return g
	}
	return p.Labels[labelPodGroup]
}

func rankOf(p *corev1.Pod) string {
	if rank := p.Labels[convoy.LabelReplicaRank]; rank != "" {
		return rank
	}
	return p.Name
}

func keyOf(p *corev1.Pod) podKey {
	return podKey{ns: p.Namespace, gang: gangOf(p), role: p.Labels[convoy.LabelReplicaRole], rank: rankOf(p), attempt: p.Labels[convoy.LabelRestartAttempt]}
}

// alive: the pod may run its containers, a Terminating one included.
func alive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// clash says why two live pods of one gang must not be alive at once; "" when they may.
func clash(a, b *corev1.Pod) string {
	attemptA, attemptB := a.Labels[convoy.LabelRestartAttempt], b.Labels[convoy.LabelRestartAttempt]
	switch {
	case attemptA != attemptB:
		return fmt.Sprintf("%s (attempt %q) alive beside %s (attempt %q)", a.Name, attemptA, b.Name, attemptB)
	case a.Labels[convoy.LabelReplicaRole] == b.Labels[convoy.LabelReplicaRole] && rankOf(a) == rankOf(b):
		return fmt.Sprintf("%s alive beside %s, of the same role and rank", a.Name, b.Name)
	}
	return ""
}

func (w *watcher) update(p *corev1.Pod) {
	gang := types.NamespacedName{Namespace: p.Namespace, Name: gangOf(p)}
	w.mu.Lock()
	if _, ok := w.expected[gang]; !ok {
		w.mu.Unlock()
		return
	}
	w.pods[p.UID] = p
	if _, ok := w.seen[p.UID]; !ok {
		w.seen[p.UID] = len(w.seen)
	}
	k := keyOf(p)
	if w.created[k] == nil {
		w.created[k] = map[types.UID]bool{}
	}
	w.created[k][p.UID] = true
	if w.live[gang] == nil {
		w.live[gang] = map[types.UID]*corev1.Pod{}
	}
	if alive(p) {
		w.live[gang][p.UID] = p
		for uid, q := range w.live[gang] {
			if uid == p.UID {
				continue
			}
			if why := clash(p, q); why != "" {
				newer := p.UID
				if w.seen[uid] > w.seen[p.UID] {
					newer = uid
				}
				if _, ok := w.dups[newer]; !ok {
					w.dups[newer] = p.Namespace + ": " + why
				}
			}
		}
	} else {
		delete(w.live[gang], p.UID)
	}
	var onBind func(types.NamespacedName, int)
	n := 0
	if p.Spec.NodeName != "" && !w.bound[gang][p.UID] {
		if w.bound[gang] == nil {
			w.bound[gang] = map[types.UID]bool{}
		}
		w.bound[gang][p.UID] = true
		onBind, n = w.onBind, len(w.bound[gang])
	}
	w.mu.Unlock()
	if onBind != nil {
		onBind(gang, n)
	}
}

func (w *watcher) remove(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pods[p.UID]; !ok {
		return
	}
	delete(w.pods, p.UID)
	delete(w.live[types.NamespacedName{Namespace: p.Namespace, Name: gangOf(p)}], p.UID)
}

// checkPartial finds the gang attempts with some pods bound and holding GPUs while others of the
// attempt are not bound. Finished pods count as the gang's (a finishing gang is whole), deleted
// ones do not (a gang half torn down holds GPUs partly).
func (w *watcher) checkPartial(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	type count struct{ holding, done int }
	counts := map[gangKey]*count{}
	for _, p := range w.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		k := gangKey{ns: p.Namespace, gang: gangOf(p), attempt: p.Labels[convoy.LabelRestartAttempt]}
		c := counts[k]
		if c == nil {
			c = &count{}
			counts[k] = c
		}
		switch {
		case !alive(p):
			c.done++
		case p.Spec.NodeName != "":
			c.holding++
		}
	}
	for k, c := range counts {
		want := w.expected[types.NamespacedName{Namespace: k.ns, Name: k.gang}]
		if c.holding > 0 && c.holding+c.done < want {
			if _, ok := w.partialSince[k]; !ok {
				w.partialSince[k] = now
			}
		} else {
			delete(counts, k)
		}
	}
	for k, since := range w.partialSince {
		d := now.Sub(since)
		if d > w.longest[k.ns] {
			w.longest[k.ns] = d
		}
		if d > w.grace {
			w.partial[k] = true
		}
		if counts[k] == nil {
			delete(w.partialSince, k)
		}
	}
}

// tally is what the watcher counted in one namespace.
type tally struct {
	duplicates, recreated, partial int
	longestPartial                 time.Duration
	// clashes say why each duplicate was one.
	clashes []string
}

func (w *watcher) tally(ns string) tally {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t tally
	for _, why := range w.dups {
		if strings.HasPrefix(why, ns+": ") {
			t.duplicates++
			t.clashes = append(t.clashes, why)
		}
	}
	slices.Sort(t.clashes)
	for k, uids := range w.created {
		if k.ns == ns && len(uids) > 1 {
			t.recreated += len(uids) - 1
		}
	}
	gangs := map[string]bool{}
	for k := range w.partial {
		if k.ns == ns {
			gangs[k.gang] = true
		}
	}
	t.partial = len(gangs)
	t.longestPartial = w.longest[ns]
	return t
}

// boundPods returns how many pods of the gang have ever been seen bound.
func (w *watcher) boundPods(gang types.NamespacedName) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound[gang])
}

// setOnBind replaces the bind hook; nil removes it.
func (w *watcher) setOnBind(f func(gang types.NamespacedName, bound int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onBind = f
}

// livePods lists the gang's pods the watcher has now, for a check after the fact.
func (w *watcher) livePods(gang types.NamespacedName) []*corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pods []*corev1.Pod
	for _, p := range w.pods {
		if p.Namespace == gang.Namespace && gangOf(p) == gang.Name {
			pods = append(pods, p)
		}
	}
	return pods
}

// jobsIn lists the TrainingJobs of a namespace.
func jobsIn(ctx context.Context, k client.Client, ns string) ([]convoy.TrainingJob, error) {
	list := &convoy.TrainingJobList{}
	if err := k.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// runningGangs counts the gangs of namespace ns with every pod running, none of them going.
func (w *watcher) runningGangs(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for gang, want := range w.expected {
		if gang.Namespace != ns {
			continue
		}
		running := 0
		for _, p := range w.live[gang] {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running == want {
			n++
		}
	}
	return n
}

// createdPods lists the UIDs of every pod of the gang ever seen.
func (w *watcher) createdPods(ns, gang string) []types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	var uids []types.UID
	for k, created := range w.created {
		if k.ns == ns && k.gang == gang {
			for uid := range created {
				uids = append(uids, uid)
			}
		}
	}
	return uids
}

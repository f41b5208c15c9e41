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

package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/convoy-dev/convoy/operator/pkg/controller"
)

// noteLimit is the most bytes an events.k8s.io/v1 Event's note may have: the API server refuses a
// longer one (and the event with it).
const noteLimit = 1024

// eventRecorder records events through the events.k8s.io API, cutting a note longer than the API
// allows (a condition's message quotes API server and scheduler errors) instead of losing the event,
// and with the objects' references unversioned, so that an event that repeats one of the same type,
// reason and action on the same object within 6 minutes is counted in that one's series, as the
// recorder means to, instead of written anew: the recorder keys its series by the reference, which
// carries the resourceVersion that every status write changes.
type eventRecorder struct {
	events.EventRecorder
}

// Eventf records the event with its note cut to noteLimit.
func (r eventRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(unversioned(regarding), unversioned(related), eventtype, reason, action, "%s", controller.Truncate(fmt.Sprintf(note, args...), noteLimit))
}

// unversioned is obj, or a copy of it without its resourceVersion.
func unversioned(obj runtime.Object) runtime.Object {
	if m, err := meta.Accessor(obj); obj == nil || err != nil || m.GetResourceVersion() == "" {
		return obj
	}
	c := obj.DeepCopyObject()
	m, _ := meta.Accessor(c)
	m.SetResourceVersion("")
	return c
}

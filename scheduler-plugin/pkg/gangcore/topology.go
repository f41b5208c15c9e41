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
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// TopologyLevel is one topology level of the cluster: its name, and the node label whose value
// names a node's domain of it.
type TopologyLevel struct {
	Name, NodeLabel string
}

// levelOf is the planner's level that s names: a topology level's name or node label, or one of
// nvlink, node (or kubernetes.io/hostname) and cluster.
func (o *Options) levelOf(s string) (planner.Level, bool) {
	for i, l := range o.Levels {
		if strings.EqualFold(s, l.Name) || s == l.NodeLabel {
			return planner.TopologyLevel(i, len(o.Levels)), true
		}
	}
	switch {
	case s == corev1.LabelHostname:
		return planner.LevelNode, true
	case strings.EqualFold(s, "nvlink"), strings.EqualFold(s, "node"), strings.EqualFold(s, "cluster"):
		return planner.ParseLevel(s)
	}
	return planner.LevelNone, false
}

// levelName is how messages name level l: its topology level's name.
func (o *Options) levelName(l planner.Level) string {
	if l <= planner.LevelNode {
		return "node"
	}
	if l < planner.LevelCluster {
		if i := len(o.Levels) - 1 - int(l-planner.LevelRack); i >= 0 {
			return o.Levels[i].Name
		}
	}
	return "cluster"
}

// levelNames are the names of the topology levels and the built-in ones, for messages.
func (o *Options) levelNames() string {
	var names []string
	for _, l := range o.Levels {
		names = append(names, fmt.Sprintf("%s (%s)", l.Name, l.NodeLabel))
	}
	return strings.Join(append(names, "node", "nvlink", "cluster"), ", ")
}

// Topology returns the level and mode the pod's annotations ask for. A level without a mode is
// required, as TrainingJob's spec.scheduling.topology.mode defaults. A level the scheduler does
// not know is an error that names its levels.
func (s *State) Topology(pod *corev1.Pod) (planner.Level, bool, error) {
	name := pod.Annotations[convoy.AnnotationTopologyLevel]
	if name == "" {
		return planner.LevelNone, false, nil
	}
	l, ok := s.opts.levelOf(name)
	if !ok {
		return planner.LevelNone, false, fmt.Errorf("topology level %q (spec.scheduling.topology.level) is none of the scheduler's levels: %s; name one of them or its node label",
			name, s.opts.levelNames())
	}
	return l, pod.Annotations[convoy.AnnotationTopologyMode] != string(convoy.TopologyPreferred), nil
}

// domains are the node's values of the topology levels, outer to inner.
func (o *Options) domains(node *corev1.Node) []string {
	out := make([]string, len(o.Levels))
	for i, l := range o.Levels {
		out[i] = node.Labels[l.NodeLabel]
	}
	return out
}

// names are the topology levels' names, outer to inner, for planner.Cluster.Levels.
func (o *Options) names() []string {
	out := make([]string, len(o.Levels))
	for i, l := range o.Levels {
		out[i] = l.Name
	}
	return out
}

// labels are the topology levels' node labels, inner to outer.
func (o *Options) labels() []string {
	out := make([]string, 0, len(o.Levels))
	for i := len(o.Levels) - 1; i >= 0; i-- {
		out = append(out, o.Levels[i].NodeLabel)
	}
	return out
}

// LevelName names the topology level the pod asks for, as messages do.
func (s *State) LevelName(pod *corev1.Pod) string {
	l, _, _ := s.Topology(pod)
	return s.opts.levelName(l)
}

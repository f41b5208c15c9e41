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

package queue

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Kueue's reasons for not admitting a pod set, as its flavor assigner words them. Each becomes a
// phrase that says which resource, which flavor and how much is missing.
var reasonPatterns = []struct {
	re    *regexp.Regexp
	plain func(m []string) string
}{
	{regexp.MustCompile(`insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed`), func(m []string) string {
		return fmt.Sprintf("%s more %s than flavor %s has free", m[3], m[1], m[2])
	}},
	{regexp.MustCompile(`insufficient quota for (\S+) in flavor (\S+), previously considered podsets requests \((\S+)\) \+ current podset request \((\S+)\) > maximum capacity \((\S+)\)`), func(m []string) string {
		want := m[4] + " " + m[1]
		if m[3] != "0" {
			want = fmt.Sprintf("%s %s (%s with the job's other roles)", m[4], m[1], m[3]+"+"+m[4])
		}
		return fmt.Sprintf("%s, more than flavor %s can ever give it (%s, borrowing included)", want, m[2], m[5])
	}},
	{regexp.MustCompile(`untolerated taint (\S+) in flavor ([^\s,]+)`), func(m []string) string {
		return fmt.Sprintf("a toleration of %s, the taint of flavor %s", m[1], m[2])
	}},
	{regexp.MustCompile(`flavor (\S+) doesn't match node affinity`), func(m []string) string {
		return fmt.Sprintf("nodes that flavor %s does not have (spec.scheduling.nodeSelector or affinity)", m[1])
	}},
	{regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`), func(m []string) string {
		return fmt.Sprintf("%s, for which the ClusterQueue has no quota", m[1])
	}},
	{regexp.MustCompile(`flavor (\S+) not found`), func(m []string) string {
		return fmt.Sprintf("flavor %s, which does not exist", m[1])
	}},
}

var podSetPrefix = regexp.MustCompile(`(?:^|; )couldn't assign flavors to pod set (\S+): `)

// plainPending rewrites the message of a Workload's QuotaReserved=False condition in words a
// data scientist can act on; what it does not recognise it keeps as Kueue wrote it.
func plainPending(msg string) string {
	switch {
	case strings.HasPrefix(msg, "LocalQueue ") && strings.HasSuffix(msg, " doesn't exist"):
		return msg + ": create it, or name an existing one in spec.scheduling.queue (`kubectl get localqueues`)"
	case strings.HasPrefix(msg, "ClusterQueue ") && (strings.HasSuffix(msg, " doesn't exist") || strings.HasSuffix(msg, " is inactive")):
		return msg + ": ask your queue administrator (`kubectl describe clusterqueue`)"
	case msg == "Workload no longer fits after processing another workload":
		return "another job took the free quota first; Kueue tries again"
	}
	locs := podSetPrefix.FindAllStringSubmatchIndex(msg, -1)
	if len(locs) == 0 {
		return msg
	}
	var parts []string
	for i, loc := range locs {
		end := len(msg)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		parts = append(parts, fmt.Sprintf("role %s needs %s", msg[loc[2]:loc[3]], plainReasons(msg[loc[1]:end])))
	}
	return strings.Join(parts, "; ")
}

// plainReasons rewrites the reasons one pod set does not fit, one per flavor tried.
func plainReasons(reasons string) string {
	type match struct {
		at    int
		plain string
	}
	var found []match
	rest := []byte(reasons)
	for _, p := range reasonPatterns {
		for _, loc := range p.re.FindAllStringSubmatchIndex(reasons, -1) {
			m := make([]string, len(loc)/2)
			for i := range m {
				m[i] = reasons[loc[2*i]:loc[2*i+1]]
			}
			found = append(found, match{at: loc[0], plain: p.plain(m)})
			for i := loc[0]; i < loc[1]; i++ {
				rest[i] = ' '
			}
		}
	}
	// What no pattern matched, separators aside, is a reason this version does not know: keep it.
	if unknown := strings.Join(strings.Fields(strings.ReplaceAll(string(rest), ",", " ")), " "); unknown != "" {
		found = append(found, match{at: len(reasons), plain: unknown})
	}
	slices.SortFunc(found, func(a, b match) int { return a.at - b.at })
	plain := make([]string, len(found))
	for i, f := range found {
		plain[i] = f.plain
	}
	return strings.Join(plain, ", or ")
}

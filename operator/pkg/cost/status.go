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

package cost

import (
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Prices is the price list in force as the operator read it.
type Prices struct {
	// List is nil when there is no usable price list.
	List *PriceList
	// Source names the ConfigMap, for example "ConfigMap convoy-system/convoy-prices".
	Source string
	// Problem says what is wrong with the ConfigMap: missing, or the keys left out and why.
	Problem string
}

// Update returns a job's cost after prev: the usage of pods since prev.AccruedAt up to until (to
// the second, as the pods' own times are), priced by prices. nodes are the pods' nodes still
// known. It returns nil while the job's pods have held nothing.
func Update(prev *convoy.CostStatus, pods []*corev1.Pod, nodes map[string]Node, prices Prices, until time.Time) *convoy.CostStatus {
	to := until.Truncate(time.Second)
	var from time.Time
	var usage []convoy.ResourceUsage
	if prev != nil {
		usage = prev.Usage
		if prev.AccruedAt != nil {
			from = prev.AccruedAt.Time
		}
	}
	if to.Before(from) {
		to = from
	}
	usage = Accrue(usage, pods, nodes, from, to)
	if len(usage) == 0 {
		return nil
	}
	at := metav1.NewTime(to)
	st := &convoy.CostStatus{Usage: usage, AccruedAt: &at, GPUHours: round(float64(GPUSeconds(usage)) / 3600)}
	st.Summary = fmt.Sprintf("%s GPU-h", formatHours(st.GPUHours))
	switch prices.List {
	case nil:
		st.Message = fmt.Sprintf("no price list: %s; the administrator sets the prices there (docs/operations.md)", prices.Problem)
	default:
		amount, missing, ok := prices.List.Price(usage)
		if !ok {
			st.Message = fmt.Sprintf("no price for %s in %s: the administrator adds %s per GPU-hour",
				strings.Join(missing, ", "), prices.Source, map[bool]string{true: "that key", false: "these keys"}[len(missing) == 1])
			if prices.Problem != "" {
				st.Message += "; " + prices.Problem
			}
			break
		}
		amount = round(amount)
		st.Amount, st.Currency = &amount, prices.List.Currency
		st.Summary = fmt.Sprintf("%.2f %s", amount, st.Currency)
	}
	return st
}

// HourlyRate is what pods cost per hour as they hold their resources now, by prices; 0 when
// nothing they hold is priced.
func HourlyRate(pods []*corev1.Pod, nodes map[string]Node, list *PriceList, now time.Time) float64 {
	if list == nil {
		return 0
	}
	var holding []*corev1.Pod
	for _, pod := range pods {
		if Holding(pod) {
			holding = append(holding, pod)
		}
	}
	amount, _, _ := list.Price(Accrue(nil, holding, nodes, now, now.Add(time.Hour)))
	return amount
}

// round keeps six decimals: enough for any currency, and a status that does not churn in the
// last bits of a float.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func formatHours(h float64) string {
	if h >= 10 {
		return fmt.Sprintf("%.0f", h)
	}
	return fmt.Sprintf("%.2f", h)
}

// Sum adds up jobs' costs (a sweep's trials'): their GPU-hours, and their amounts when every job
// that used anything has one, all in one currency. It returns nil when no job used anything.
func Sum(costs []*convoy.CostStatus) *convoy.CostTotal {
	var total convoy.CostTotal
	amount, priced := 0.0, true
	for _, c := range costs {
		if c == nil {
			continue
		}
		total.GPUHours += c.GPUHours
		switch {
		case c.Amount == nil, total.Currency != "" && c.Currency != total.Currency:
			priced = false
		default:
			amount += *c.Amount
			total.Currency = c.Currency
		}
	}
	if total.GPUHours == 0 && total.Currency == "" && priced {
		return nil
	}
	total.GPUHours = round(total.GPUHours)
	total.Summary = fmt.Sprintf("%s GPU-h", formatHours(total.GPUHours))
	if priced && total.Currency != "" {
		amount = round(amount)
		total.Amount = &amount
		total.Summary = fmt.Sprintf("%.2f %s", amount, total.Currency)
	} else {
		total.Currency = ""
	}
	return &total
}

// Of is a total as a cost that Sum adds to others; nil stays nil.
func Of(t *convoy.CostTotal) *convoy.CostStatus {
	if t == nil {
		return nil
	}
	return &convoy.CostStatus{GPUHours: t.GPUHours, Amount: t.Amount, Currency: t.Currency}
}

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

// Package cost turns the resources a TrainingJob's pods held into money: usage.go measures what
// they held, on which kind of node and for how long; pricelist.go reads the administrator's price
// list (a ConfigMap) and prices that usage. Both are pure: the reconciler feeds them what it read.
package cost

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Keys of the price list ConfigMap's data.
const (
	// KeyCurrency names the currency every price is in, for example USD.
	KeyCurrency = "currency"
	// gpu.<product>[.<capacity type>]: per GPU-hour; cpu[.<capacity type>]: per core-hour;
	// memory[.<capacity type>]: per GiB-hour. Without a capacity type a price holds for both.
	prefixGPU    = "gpu."
	keyCPU       = "cpu"
	keyMemory    = "memory"
	capacityAny  = ""
	keyFormatDoc = "gpu.<product>[.spot|.on-demand] (per GPU-hour), cpu[.spot|.on-demand] (per core-hour), memory[.spot|.on-demand] (per GiB-hour) or currency"
)

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// PriceList is the administrator's prices, per hour, in Currency.
type PriceList struct {
	Currency string
	// gpu maps a GPU product and capacity type ("" for any) to its price per GPU-hour.
	gpu map[priceKey]float64
	// cpu and memory map a capacity type ("" for any) to the price per core-hour and per GiB-hour.
	cpu    map[string]float64
	memory map[string]float64
}

type priceKey struct{ product, capacityType string }

// KeyError is a price list entry that cannot be used, and how to fix it.
type KeyError struct {
	Key, Problem string
}

func (e KeyError) Error() string { return fmt.Sprintf("key %q: %s", e.Key, e.Problem) }

// Parse reads a price list from a ConfigMap's data. Entries that cannot be used are left out and
// returned as KeyErrors naming the key and the fix; usage they would have priced stays unpriced.
func Parse(data map[string]string) (*PriceList, []KeyError) {
	pl := &PriceList{gpu: map[priceKey]float64{}, cpu: map[string]float64{}, memory: map[string]float64{}}
	var errs []KeyError
	for _, key := range slices.Sorted(maps.Keys(data)) {
		value := strings.TrimSpace(data[key])
		if key == KeyCurrency {
			if !currencyPattern.MatchString(value) {
				errs = append(errs, KeyError{key, fmt.Sprintf("%q is not a currency: use its three-letter ISO 4217 code, for example USD or EUR", value)})
				continue
			}
			pl.Currency = value
			continue
		}
		price, err := strconv.ParseFloat(value, 64)
		if err != nil || price < 0 || math.IsInf(price, 0) || math.IsNaN(price) {
			errs = append(errs, KeyError{key, fmt.Sprintf("%q is not a price: use a number of at least 0, for example \"2.50\"", value)})
			continue
		}
		resource, capacity, ok := splitKey(key)
		switch {
		case !ok:
			errs = append(errs, KeyError{key, "not a price list key: use " + keyFormatDoc})
		case resource == keyCPU:
			pl.cpu[capacity] = price
		case resource == keyMemory:
			pl.memory[capacity] = price
		default:
			pl.gpu[priceKey{strings.TrimPrefix(resource, prefixGPU), capacity}] = price
		}
	}
	if pl.Currency == "" && (len(pl.gpu) > 0 || len(pl.cpu) > 0 || len(pl.memory) > 0) && !slices.ContainsFunc(errs, func(e KeyError) bool { return e.Key == KeyCurrency }) {
		errs = append(errs, KeyError{KeyCurrency, "missing: add the currency every price is in, for example currency: USD"})
	}
	if pl.Currency == "" {
		// Amounts without a currency would be numbers nobody can read: nothing is priced.
		pl.gpu, pl.cpu, pl.memory = nil, nil, nil
	}
	return pl, errs
}

// splitKey splits gpu.<product>[.<capacity type>], cpu[.<capacity type>] and
// memory[.<capacity type>] into the resource ("gpu.<product>", "cpu" or "memory") and the
// capacity type ("" when none is named).
func splitKey(key string) (resource, capacity string, ok bool) {
	resource = key
	for _, c := range []string{convoy.CapacityTypeSpot, convoy.CapacityTypeOnDemand} {
		if r, found := strings.CutSuffix(key, "."+c); found {
			resource, capacity = r, c
			break
		}
	}
	switch {
	case resource == keyCPU || resource == keyMemory:
		return resource, capacity, true
	case strings.HasPrefix(resource, prefixGPU) && len(resource) > len(prefixGPU):
		return resource, capacity, true
	}
	return "", "", false
}

// price returns the entry for capacity type c, else the one for any capacity type.
func price[K comparable](m map[K]float64, specific, any K) (float64, bool) {
	if p, ok := m[specific]; ok {
		return p, true
	}
	p, ok := m[any]
	return p, ok
}

// Price is the amount of usage, in pl.Currency. CPU and memory cost only where the list prices
// them; GPU-seconds on a product and capacity type without a GPU price leave the amount unknown:
// ok is false and missing names the keys to add.
func (pl *PriceList) Price(usage []convoy.ResourceUsage) (amount float64, missing []string, ok bool) {
	for _, u := range usage {
		if u.GPUSeconds > 0 {
			p, found := price(pl.gpu, priceKey{u.Product, u.CapacityType}, priceKey{u.Product, capacityAny})
			if !found {
				missing = append(missing, prefixGPU+u.Product+"."+u.CapacityType)
				continue
			}
			amount += HourlyCharge(p, float64(u.GPUSeconds))
		}
		if p, found := price(pl.cpu, u.CapacityType, capacityAny); found {
			amount += HourlyCharge(p, u.CPUCoreSeconds)
		}
		if p, found := price(pl.memory, u.CapacityType, capacityAny); found {
			amount += HourlyCharge(p, u.MemoryGiBSeconds)
		}
	}
	return amount, missing, len(missing) == 0
}

// HourlyCharge is what seconds of a unit cost at perHour.
func HourlyCharge(perHour, seconds float64) float64 {
	return perHour * seconds / 3600
}

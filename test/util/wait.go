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
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every interval until it holds. After timeout it fails the test, naming
// what it waited for and the last word cond gave (the state it saw).
func Eventually(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %v for %s: %v; last: %s", timeout, what, err, last)
	}
}

// EventuallyErr is Eventually for a cond that says why it does not hold with an error.
func EventuallyErr(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	Eventually(t, interval, timeout, what, func() (bool, string) {
		ok, err := cond()
		return ok, fmt.Sprint(err)
	})
}

// Consistently fails the test when cond does not hold at any poll, every interval during d.
func Consistently(t testing.TB, interval, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(interval) {
		if ok, why := cond(); !ok {
			t.Fatalf("%s: %s", what, why)
		}
	}
}

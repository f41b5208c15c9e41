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

package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestHyperparametersReadLegacyMixedPrecision(t *testing.T) {
	cases := map[string]struct {
		stored   string
		want     Hyperparameters
		wantMode string
		wantErr  bool
	}{
		"boolean true":                {stored: `{"mixedPrecision": true}`, want: Hyperparameters{MixedPrecision: ptr.To(true)}, wantMode: "bf16"},
		"boolean true with precision": {stored: `{"mixedPrecision": true, "precision": "fp8"}`, want: Hyperparameters{MixedPrecision: ptr.To(true), Precision: PrecisionFP8}, wantMode: "fp8"},
		"boolean false":               {stored: `{"mixedPrecision": false}`, want: Hyperparameters{MixedPrecision: ptr.To(false)}, wantMode: "no"},
		"precision alone":             {stored: `{"precision": "fp16"}`, want: Hyperparameters{Precision: PrecisionFP16}, wantMode: "fp16"},
		"neither":                     {stored: `{"epochs": 3}`, want: Hyperparameters{Epochs: ptr.To[int32](3)}, wantMode: ""},
		"null":                        {stored: `{"mixedPrecision": null}`, want: Hyperparameters{}, wantMode: ""},
		"legacy bf16":                 {stored: `{"mixedPrecision": "bf16", "epochs": 3}`, want: Hyperparameters{MixedPrecision: ptr.To(true), Precision: PrecisionBF16, Epochs: ptr.To[int32](3)}, wantMode: "bf16"},
		"legacy fp16":                 {stored: `{"mixedPrecision": "fp16"}`, want: Hyperparameters{MixedPrecision: ptr.To(true), Precision: PrecisionFP16}, wantMode: "fp16"},
		"legacy fp8":                  {stored: `{"mixedPrecision": "fp8"}`, want: Hyperparameters{MixedPrecision: ptr.To(true), Precision: PrecisionFP8}, wantMode: "fp8"},
		"legacy no":                   {stored: `{"mixedPrecision": "no"}`, want: Hyperparameters{MixedPrecision: ptr.To(false)}, wantMode: "no"},
		"unknown string":              {stored: `{"mixedPrecision": "fp64"}`, wantErr: true},
		"number":                      {stored: `{"mixedPrecision": 16}`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got Hyperparameters
			err := json.Unmarshal([]byte(tc.stored), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decoded (-want,+got):\n%s", diff)
			}
			if mode := got.MixedPrecisionMode(); mode != tc.wantMode {
				t.Errorf("MixedPrecisionMode() = %q, want %q", mode, tc.wantMode)
			}
		})
	}
}

// A TrainingJob read back after writing keeps mixedPrecision a boolean.
func TestHyperparametersRoundTrip(t *testing.T) {
	in := TrainingJob{Spec: TrainingJobSpec{Hyperparameters: &Hyperparameters{MixedPrecision: ptr.To(true), Precision: PrecisionFP16}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out TrainingJob
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip of %s (-want,+got):\n%s", b, diff)
	}
}

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
	"strings"
	"testing"
)

func TestParseSpotNodeLabel(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    SpotNodeLabel
		wantErr string
	}{
		"gke":                {in: "cloud.google.com/gke-spot=true", want: SpotNodeLabel{Key: "cloud.google.com/gke-spot", Value: "true"}},
		"aks":                {in: "kubernetes.azure.com/scalesetpriority=spot", want: SpotNodeLabel{Key: "kubernetes.azure.com/scalesetpriority", Value: "spot"}},
		"no value":           {in: "cloud.google.com/gke-spot", wantErr: "is not key=value: name the label and the value it has on spot nodes"},
		"empty value":        {in: "cloud.google.com/gke-spot=", wantErr: "is not key=value"},
		"key no label key":   {in: "gke spot=true", wantErr: `"gke spot=true": the key is no label key`},
		"value no label val": {in: "eks.amazonaws.com/capacityType=SP OT", wantErr: "the value is no label value"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSpotNodeLabel(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSpotNodeLabel(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSpotNodeLabel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if got.String() != tc.in {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}

func TestIsSpotNode(t *testing.T) {
	gke := []SpotNodeLabel{{Key: "cloud.google.com/gke-spot", Value: "true"}, {Key: "cloud.google.com/gke-preemptible", Value: "true"}}
	cases := []struct {
		labels map[string]string
		spot   []SpotNodeLabel
		want   bool
	}{
		{labels: map[string]string{LabelCapacityType: "spot"}, want: true},
		{labels: map[string]string{LabelCapacityType: "on-demand"}},
		{labels: map[string]string{"cloud.google.com/gke-spot": "true"}},
		{labels: map[string]string{"cloud.google.com/gke-preemptible": "true"}, spot: gke, want: true},
		{labels: map[string]string{LabelCapacityType: "spot"}, spot: gke},
	}
	for _, tc := range cases {
		if got := IsSpotNode(tc.labels, tc.spot); got != tc.want {
			t.Errorf("IsSpotNode(%v, %v) = %v, want %v", tc.labels, tc.spot, got, tc.want)
		}
	}
}

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
	"fmt"
)

// DefaultPrecision is the precision of mixed-precision training when hyperparameters.precision is unset.
const DefaultPrecision = PrecisionBF16

// MixedPrecisionMode is the training precision mode as Hugging Face Accelerate's mixed_precision
// names it: the precision (bf16 by default) when mixed precision is on, "no" when it is off, and
// "" when neither mixedPrecision nor precision is set.
func (h *Hyperparameters) MixedPrecisionMode() string {
	switch {
	case h == nil || h.MixedPrecision == nil && h.Precision == "":
		return ""
	case h.MixedPrecision != nil && !*h.MixedPrecision:
		return "no"
	case h.Precision != "":
		return string(h.Precision)
	}
	return string(DefaultPrecision)
}

// UnmarshalJSON reads hyperparameters as stored, including those written when mixedPrecision was
// a string ("no", "fp16", "bf16" or "fp8"): "no" reads as mixedPrecision false, a precision as
// mixedPrecision true with that precision.
func (h *Hyperparameters) UnmarshalJSON(data []byte) error {
	type plain Hyperparameters
	in := struct {
		*plain
		// MixedPrecision shadows the embedded field of the same JSON name, so either form decodes.
		MixedPrecision json.RawMessage `json:"mixedPrecision,omitempty"`
	}{plain: (*plain)(h)}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	h.MixedPrecision = nil
	if len(in.MixedPrecision) == 0 || string(in.MixedPrecision) == "null" {
		return nil
	}
	var on bool
	if err := json.Unmarshal(in.MixedPrecision, &on); err == nil {
		h.MixedPrecision = &on
		return nil
	}
	var legacy string
	if err := json.Unmarshal(in.MixedPrecision, &legacy); err != nil {
		return fmt.Errorf("spec.hyperparameters.mixedPrecision must be true or false, not %s", in.MixedPrecision)
	}
	switch p := Precision(legacy); p {
	case "no":
		on = false
	case PrecisionFP16, PrecisionBF16, PrecisionFP8:
		on = true
		if h.Precision == "" {
			h.Precision = p
		}
	default:
		return fmt.Errorf("spec.hyperparameters.mixedPrecision must be true or false, not %q", legacy)
	}
	h.MixedPrecision = &on
	return nil
}

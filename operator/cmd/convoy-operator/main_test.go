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

package main

import (
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestLogLevelInAnyCase(t *testing.T) {
	for in, want := range map[string]zapcore.Level{
		"": zapcore.InfoLevel, "DEBUG": zapcore.DebugLevel, "Info": zapcore.InfoLevel, " warning ": zapcore.WarnLevel,
		"ERROR": zapcore.ErrorLevel, "3": zapcore.Level(-3),
	} {
		if got, err := logLevel(in); err != nil || got != want {
			t.Errorf("LOG_LEVEL=%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := logLevel("verbose"); err == nil || !strings.Contains(err.Error(), "use debug, info, warn, error") {
		t.Errorf("LOG_LEVEL=verbose: error %v, want one naming the accepted values", err)
	}
}

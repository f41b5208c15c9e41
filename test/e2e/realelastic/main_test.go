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

// Package realelastic tests elastic TrainingJobs on real nodes (test/e2e/realstack): a PyTorch gang
// that grows onto a freed node and shrinks for a higher-priority job, its epochs continuing. It is
// a package of its own so that make test-real runs it after test/e2e/adoption, beside
// test/e2e/realnode.
package realelastic

import (
	"testing"

	"github.com/convoy-dev/convoy/test/e2e/realstack"
)

func TestMain(m *testing.M) { realstack.Main(m) }

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

// Package realcapacity tests running gangs on real nodes (test/e2e/realstack) as the capacity
// under them changes: an elastic PyTorch job grows onto a freed node and shrinks for a
// higher-priority job, its epochs continuing; a gang whose node is lost restarts whole on another
// node from its checkpoint. make test-real runs it beside test/e2e/realnode and test/e2e/adoption.
package realcapacity

import (
	"testing"

	"github.com/convoy-dev/convoy/test/e2e/realstack"
)

func TestMain(m *testing.M) { realstack.Main(m) }

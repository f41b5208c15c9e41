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

// Package adoption installs Convoy as a platform team would: on real nodes labelled only as their
// provider and NVIDIA's operators label them, it runs the install blocks of the README with bash,
// as written, then trains a TrainingJob written for the seed design.
package adoption

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// marker precedes a fenced block the adoption tier runs: `<!-- test: NAME -->` on the line before
// the opening fence.
const marker = "<!-- test: "

// Blocks returns the fenced blocks of markdown marked for the test, by name, each without its
// fences. A marker not followed by a fence, an unclosed fence or a name used twice is an error.
func Blocks(markdown []byte) (map[string]string, error) {
	blocks := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(text, marker) {
			continue
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(text, marker), "-->")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: a marker is %sNAME -->, got %q", line, marker, text)
		}
		if _, dup := blocks[name]; dup {
			return nil, fmt.Errorf("line %d: block %q marked twice", line, name)
		}
		if !sc.Scan() || !strings.HasPrefix(strings.TrimSpace(sc.Text()), "```") {
			return nil, fmt.Errorf("line %d: marker %q is not followed by a fenced block", line, name)
		}
		line++
		var body strings.Builder
		closed := false
		for sc.Scan() {
			line++
			if strings.TrimSpace(sc.Text()) == "```" {
				closed = true
				break
			}
			body.WriteString(sc.Text() + "\n")
		}
		if !closed {
			return nil, fmt.Errorf("block %q is not closed", name)
		}
		blocks[name] = body.String()
	}
	return blocks, sc.Err()
}

// SetVariable returns block with the line that assigns the shell variable name (`NAME=value`,
// the value a placeholder the reader replaces) assigning value instead, as a reader sets it.
func SetVariable(block, name, value string) (string, error) {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, name+"=") {
			lines[i] = name + "=" + value
			return strings.Join(lines, "\n"), nil
		}
	}
	return "", fmt.Errorf("the block has no line %s=... for the reader to set:\n%s", name, block)
}

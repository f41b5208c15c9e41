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

// Command docscheck fails when the Markdown names what does not exist: a link or file path, a make
// target, a flag of Convoy's commands, a TrainingJob, TrainingSweep or GPUNode field, a printer
// column, a metric or its labels, an environment variable, or a quoted message (<q>…</q>) that no
// format string in the code can print. It also prints the size of the hand-written Markdown
// against its budget. `make verify` runs it.
//
// A message the docs quote is written <q>as the code prints it</q>: a quote that only begins a
// message ends in "…". DOCSCHECK_DEBUG=1 prints the format each quote matched.
//
//	go run ./hack/docscheck [-root .]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// budget is the most hand-written Markdown the repository holds, in bytes.
const budget = 200 << 10

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	problems, size, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(1)
	}
	met := "met"
	if size > budget {
		met = "over"
	}
	fmt.Printf("docscheck: hand-written Markdown %d KB (budget %d KB: %s)\n", size>>10, budget>>10, met)
	if len(problems) > 0 {
		sort.Strings(problems)
		for _, p := range problems {
			fmt.Println(p)
		}
		fmt.Printf("docscheck: %d names in the Markdown do not exist in the code: fix the docs (or the code)\n", len(problems))
		os.Exit(1)
	}
}

// check reads every hand-written Markdown file under root and returns what it names that does not
// exist, and the files' total size.
func check(root string) ([]string, int, error) {
	files, err := markdownFiles(root)
	if err != nil {
		return nil, 0, err
	}
	idx, err := index(root)
	if err != nil {
		return nil, 0, err
	}
	var problems []string
	size := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, 0, err
		}
		size += len(b)
		for _, p := range idx.checkFile(f, string(b)) {
			problems = append(problems, f+":"+p)
		}
	}
	return problems, size, nil
}

// markdownFiles are the hand-written Markdown files: every tracked .md but the generated
// reference and vendored or built trees.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel != "." && strings.HasPrefix(d.Name(), "."), rel == "bin", rel == "docs/reference",
				d.Name() == "node_modules", d.Name() == "testdata", strings.HasPrefix(rel, "deploy/helm/convoy/crds"):
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // another module (hack/tools)
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out, err
}

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

package images_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// stage is what a Dockerfile's stage says about the image it makes.
type stage struct {
	name, from string
	copies     [][2]string // COPY --from sources and destinations
	user       string
	ports      []string
	env        []string
	entrypoint []string
}

// parseDockerfile returns the stages of a Dockerfile: FROM, COPY, USER, EXPOSE, ENV and
// ENTRYPOINT (exec form) are read, line continuations joined, comments dropped.
func parseDockerfile(t *testing.T, file string) []*stage {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	var stages []*stage
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		args := strings.Fields(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			s := &stage{from: args[0]}
			if len(args) == 3 && strings.EqualFold(args[1], "AS") {
				s.name = args[2]
			}
			stages = append(stages, s)
		}
		if len(stages) == 0 {
			continue
		}
		s := stages[len(stages)-1]
		switch strings.ToUpper(instr) {
		case "COPY":
			if len(args) == 3 && strings.HasPrefix(args[0], "--from=") {
				s.copies = append(s.copies, [2]string{args[1], args[2]})
			}
		case "USER":
			s.user = args[0]
		case "EXPOSE":
			for _, p := range args {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				s.ports = append(s.ports, p)
			}
		case "ENV":
			s.env = append(s.env, args...)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &s.entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s is not in exec form: %v", file, rest, err)
			}
		}
	}
	return stages
}

// TestDockerfilesDescribeTheGoBuiltImages keeps Dockerfile.operator and Dockerfile.scheduler, for
// those who build with Docker, describing the images test/images builds: the same binary at the
// same path, entrypoint, user, ports and environment, and glibc where the Dockerfile's base has it.
func TestDockerfilesDescribeTheGoBuiltImages(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]images.Spec{}
	for _, s := range images.Specs(root, filepath.Join(root, "bin")) {
		specs[s.Name] = s
	}
	for _, tc := range []struct {
		dockerfile, stage, image string
	}{
		{"Dockerfile.operator", "", images.Operator},
		{"Dockerfile.scheduler", "scheduler", images.Scheduler},
		{"Dockerfile.scheduler", "node-agent", images.NodeAgent},
	} {
		t.Run(tc.image, func(t *testing.T) {
			stages := parseDockerfile(t, filepath.Join(root, tc.dockerfile))
			st := stages[len(stages)-1]
			if tc.stage != "" {
				i := slices.IndexFunc(stages, func(s *stage) bool { return s.name == tc.stage })
				if i < 0 {
					t.Fatalf("%s has no stage %s", tc.dockerfile, tc.stage)
				}
				st = stages[i]
			}
			spec := specs[tc.image]

			if len(st.copies) != 1 || len(spec.Files) != 1 {
				t.Fatalf("%s copies %v, the Go-built image %d files: want one binary each", tc.dockerfile, st.copies, len(spec.Files))
			}
			if src, dst := st.copies[0][0], st.copies[0][1]; path.Base(src) != filepath.Base(spec.Files[0].Src) || dst != spec.Files[0].Dst {
				t.Errorf("%s copies %s to %s; the Go-built image bin/%s to %s", tc.dockerfile, src, dst,
					filepath.Base(spec.Files[0].Src), spec.Files[0].Dst)
			}
			if !slices.Equal(st.entrypoint, spec.Entrypoint) {
				t.Errorf("ENTRYPOINT %q, Go-built image %q", st.entrypoint, spec.Entrypoint)
			}
			if st.user != images.NonRoot {
				t.Errorf("USER %q, Go-built image %q", st.user, images.NonRoot)
			}
			if !sameSet(st.ports, spec.Ports) {
				t.Errorf("EXPOSE %q, Go-built image %q", st.ports, spec.Ports)
			}
			if !sameSet(st.env, spec.Env) {
				t.Errorf("ENV %q, Go-built image %q", st.env, spec.Env)
			}
			// A distroless base has glibc ("base") or not ("static"). bin/'s binaries are built
			// with cgo, so the Go-built images all have glibc; where the Dockerfile's base has it,
			// the binary needs it.
			if strings.Contains(st.from, "distroless/base") && !slices.ContainsFunc(spec.Base, func(l images.DebLayer) bool {
				return l.Name == images.GlibcLayer.Name
			}) {
				t.Errorf("FROM %s has glibc; the Go-built image's base has not", st.from)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

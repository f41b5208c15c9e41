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
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	makeCall   = regexp.MustCompile(`(?:^|[\s;(&|])make\s+((?:[A-Z_]+=\S+\s+)*)([a-z][a-z0-9-]*)`)
	flagName   = regexp.MustCompile(`(?:^|\s|=|\()--([a-z0-9][a-z0-9-]*)`)
	envName    = regexp.MustCompile(`^\$?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=.*)?$`)
	fieldPath  = regexp.MustCompile(`^\.?(spec|status)\.([a-zA-Z][a-zA-Z0-9]*(?:\.[a-zA-Z][a-zA-Z0-9]*)*)`)
	metricRef  = regexp.MustCompile(`^((?:convoy|trainingjob|gpunode)_[a-z0-9_]+)(?:\{([^}]*)\})?`)
	labelName  = regexp.MustCompile(`([a-z_][a-z0-9_]*)\s*(?:=~?|!=)`)
	quoted     = regexp.MustCompile(`<q>([^<]+)</q>`)
	column     = regexp.MustCompile(`\bcolumns? ((?:[A-Z][A-Z ]*[A-Z](?:, | and )?)+)\b|\b([A-Z][A-Z]+(?: [A-Z]+)?) column\b`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	repoPath   = regexp.MustCompile(`^(api|operator|queue|scheduler-plugin|deploy|docs|test|hack|sdk|examples)/[A-Za-z0-9_./-]*$`)
	listSep    = regexp.MustCompile(`, | and `)
	linkText   = regexp.MustCompile(`\[([^]]*)\]\([^)]*\)`)
)

// checkFile returns, as "line: what", each name in the Markdown file f (relative to the root)
// that does not exist.
func (n *names) checkFile(f, text string) []string {
	var out []string
	bad := func(line int, format string, args ...any) {
		out = append(out, fmt.Sprintf("%d: %s", line, fmt.Sprintf(format, args...)))
	}
	inFence := false
	fenceShell := false
	for i, line := range strings.Split(text, "\n") {
		ln := i + 1
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") {
			inFence = !inFence
			lang := strings.TrimPrefix(t, "```")
			fenceShell = inFence && (lang == "sh" || lang == "bash" || lang == "console" || lang == "")
			continue
		}
		if inFence {
			if fenceShell {
				n.checkShell(line, ln, bad)
			}
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			n.checkLink(f, m[1], ln, bad)
		}
		for _, m := range quoted.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			if !n.printable(m[1]) {
				bad(ln, "quoted message %q is no format the code prints", m[1])
			}
		}
		for _, m := range column.FindAllStringSubmatch(line, -1) {
			list := m[1] + m[2]
			for _, c := range listSep.Split(list, -1) {
				if c = strings.TrimSpace(c); c != "" && !n.columns[c] && (m[1] != "" || strings.Contains(line, "kubectl get")) {
					bad(ln, "printer column %s does not exist", c)
				}
			}
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			n.checkCode(f, m[1], ln, bad)
		}
	}
	return out
}

// checkShell checks a line of a shell block: make targets and Convoy's flags.
func (n *names) checkShell(line string, ln int, bad func(int, string, ...any)) {
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return
	}
	code := line
	if i := strings.Index(code, " #"); i >= 0 {
		code = code[:i]
	}
	for _, m := range makeCall.FindAllStringSubmatch(code, -1) {
		if !n.targets[m[2]] {
			bad(ln, "make target %s does not exist", m[2])
		}
	}
	n.checkFlags(code, ln, bad)
	for _, tok := range strings.Fields(code) {
		tok = strings.Trim(tok, `"'(),;`)
		if repoPath.MatchString(tok) && !strings.ContainsAny(tok, "$*{<") && !strings.Contains(tok, "...") {
			n.checkPath(tok, ln, bad)
		}
	}
}

// checkPath checks that a path of the repository exists.
func (n *names) checkPath(p string, ln int, bad func(int, string, ...any)) {
	if _, err := os.Stat(filepath.Join(n.root, strings.TrimSuffix(p, "/"))); err != nil {
		bad(ln, "path %s does not exist", p)
	}
}

func (n *names) checkFlags(code string, ln int, bad func(int, string, ...any)) {
	for _, m := range flagName.FindAllStringSubmatch(code, -1) {
		if !n.flags[m[1]] && !externalFlags[m[1]] {
			bad(ln, "flag --%s is defined by no Convoy command (nor listed among other tools' in hack/docscheck)", m[1])
		}
	}
}

// checkCode checks an inline code span.
func (n *names) checkCode(f, code string, ln int, bad func(int, string, ...any)) {
	c := strings.TrimSpace(code)
	switch {
	case strings.HasPrefix(c, "make "):
		n.checkShell(c, ln, bad)
		return
	case strings.HasPrefix(c, "--") || strings.Contains(c, " --"):
		n.checkFlags(c, ln, bad)
	}
	if m := envName.FindStringSubmatch(c); m != nil && !strings.Contains(c, " ") {
		if !n.literals[m[1]] && !externalEnv[m[1]] {
			bad(ln, "environment variable %s is neither set nor read by the code", m[1])
		}
		return
	}
	if m := fieldPath.FindStringSubmatch(c); m != nil && !strings.ContainsAny(c, " <{*") {
		n.checkField(m[1], m[2], ln, bad)
		return
	}
	if m := metricRef.FindStringSubmatch(c); m != nil {
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_count"), "_sum")
		labels, ok := n.metrics[name]
		if !ok {
			labels, ok = n.metrics[m[1]]
		}
		if !ok && !strings.HasSuffix(m[1], "_") {
			bad(ln, "metric %s is registered by no code", m[1])
			return
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if !labels[l[1]] && !labels["*"] && l[1] != "le" {
				bad(ln, "metric %s has no label %s", m[1], l[1])
			}
		}
		return
	}
	if repoPath.MatchString(c) && !strings.Contains(c, "...") {
		n.checkPath(c, ln, bad)
	}
}

// checkField checks spec.x.y or status.x.y where x is a field of Convoy's CRDs.
func (n *names) checkField(top, rest string, ln int, bad func(int, string, ...any)) {
	first, _, _ := strings.Cut(rest, ".")
	if !n.topFields[first] {
		for f := range n.topFields {
			if top == "spec" && distance(f, first) <= 2 && len(first) > 6 {
				bad(ln, "field %s.%s exists in no Convoy CRD (%s.%s?)", top, first, top, f)
			}
		}
		return // another kind's field (a Pod's, a Workload's)
	}
	p := top + "." + rest
	segs := strings.Split(p, ".")
	for i := len(segs); i > 0; i-- {
		prefix := strings.Join(segs[:i], ".")
		if n.fields[prefix] {
			if i == len(segs) || n.fields[prefix+".**"] || n.fields[prefix+".*"] {
				return
			}
			break
		}
	}
	bad(ln, "field %s exists in no Convoy CRD", p)
}

// printable reports whether the code prints msg: one of its format strings, or, for a message the
// code writes piece by piece, each piece of msg between "; " a format of its own (with or without
// the "; " it starts with). A message ending in "…" may be the beginning of one.
func (n *names) printable(msg string) bool {
	msg = strings.TrimSpace(msg)
	if n.printable1(msg) {
		return true
	}
	parts := strings.Split(msg, "; ")
	if len(parts) == 1 {
		return false
	}
	for i, p := range parts {
		if !n.printable1(p) && (i == 0 || !n.printable1("; "+p)) {
			return false
		}
	}
	return true
}

func (n *names) printable1(msg string) bool {
	prefix := strings.HasSuffix(msg, "…")
	msg = strings.TrimSuffix(msg, "…")
	for _, f := range n.formats {
		// A format that is mostly verbs matches anything: it must give at least a third of the text.
		if f.literal < 15 && f.literal*3 < len(msg) {
			continue
		}
		if f.re.MatchString(msg) {
			if os.Getenv("DOCSCHECK_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "%q matches %s\n", msg, f.re)
			}
			return true
		}
		if prefix && len(msg) > 20 {
			src := strings.TrimSuffix(f.re.String(), "$")
			// The longest beginning of the format that compiles, matched up to msg's end.
			for cut := len(src); cut > 1; cut-- {
				if r, err := regexp.Compile(src[:cut] + "$"); err == nil && r.MatchString(msg) {
					return true
				}
			}
		}
	}
	return false
}

// checkLink checks a relative link: the file, and the heading its anchor names.
func (n *names) checkLink(f, target string, ln int, bad func(int, string, ...any)) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return
	}
	file, anchor, _ := strings.Cut(target, "#")
	p := f
	if file != "" {
		p = path.Clean(path.Join(path.Dir(f), file))
	}
	st, err := os.Stat(filepath.Join(n.root, p))
	if err != nil {
		bad(ln, "link %s: %s does not exist", target, p)
		return
	}
	if anchor == "" || st.IsDir() || !strings.HasSuffix(p, ".md") {
		return
	}
	anchors, err := n.anchorsOf(p)
	if err != nil {
		bad(ln, "link %s: %v", target, err)
		return
	}
	if !anchors[anchor] {
		bad(ln, "link %s: %s has no heading #%s", target, p, anchor)
	}
}

// anchorsOf returns the anchors GitHub makes of the headings of Markdown file p.
func (n *names) anchorsOf(p string) (map[string]bool, error) {
	if a, ok := n.anchors[p]; ok {
		return a, nil
	}
	b, err := os.ReadFile(filepath.Join(n.root, p))
	if err != nil {
		return nil, err
	}
	a := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		s := slug(m[1])
		if k := seen[s]; k > 0 {
			a[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			a[s] = true
		}
		seen[s]++
	}
	n.anchors[p] = a
	return a, nil
}

// slug is GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces
// made '-'.
func slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("–—…’“”×→·", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

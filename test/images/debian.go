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

package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DebLayer is a layer made of Debian packages, extracted with dpkg-deb as apt would install them
// on an empty system of the build machine's release, without running their maintainer scripts.
// What those scripts would do that the images need is done instead: the alternatives they
// register (update-alternatives --install with literal arguments; the highest priority wins) are
// linked, and the CA certificates the ca-certificates package ships are joined into
// /etc/ssl/certs/ca-certificates.crt.
type DebLayer struct {
	// Name names the layer in the cache and in the image's history.
	Name string
	// Packages are extracted as they are, without their dependencies.
	Packages []string
	// WithDependencies are extracted with their dependency closure (Depends and Pre-Depends, one
	// alternative of each, no Recommends) as apt-get install --no-install-recommends resolves it.
	WithDependencies []string
	// Omit are packages that WithDependencies' closure would hold and the image never runs (a
	// compiler a library depends on for what it builds on the target): apt resolves the closure
	// as if they were installed, so they and what only they need stay out.
	Omit []string
	// Compile are directories of Python modules byte-compiled in the extracted tree, as the
	// packages' postinst (py3compile) would: without it every Python process of the image compiles
	// what it imports again, since it runs as NonRoot and cannot keep the result. The .pyc files
	// are checked against nothing (unchecked-hash), since the layer's times are all the epoch.
	Compile []string
	// Check, when set, is a command run in the extracted tree (chroot, as NonRoot, with /dev and
	// /proc mounted) before it is packed: the layer is not cached when it fails. It needs root.
	Check []string
}

// pkg is one version of a Debian package.
type pkg struct{ Name, Version, Arch string }

func (p pkg) String() string { return p.Name + "=" + p.Version + ":" + p.Arch }

// debFile is the name apt-get download gives the package's file.
func (p pkg) debFile() string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + p.Arch + ".deb"
}

// resolvedLayer is a DebLayer with the package versions apt picks now, and the cache key they give.
type resolvedLayer struct {
	layer DebLayer
	pkgs  []pkg
	key   string
}

func (rl resolvedLayer) file(cacheDir string) string {
	return filepath.Join(cacheDir, "images", "layers", rl.layer.Name+"-"+rl.key[:16]+".tar.gz")
}

func (rl resolvedLayer) has(name string) bool {
	for _, p := range rl.pkgs {
		if p.Name == name {
			return true
		}
	}
	return false
}

// errStaleLists marks a failure that apt-get update may cure: a package or version apt's lists
// name that the mirror no longer has, or lists that do not know a package.
var errStaleLists = errors.New("apt's package lists may be stale")

// apt runs apt-get and apt-cache; it remembers what it resolved during one build.
type apt struct {
	cacheDir string
	log      func(format string, args ...any)
	updated  bool
	resolved map[string][]pkg
	listsKey string // the state of apt's lists, for memoFile
}

func (b *Builder) aptClient() *apt {
	if b.apt == nil {
		b.apt = &apt{cacheDir: b.CacheDir, log: b.logf, resolved: map[string][]pkg{}}
	}
	return b.apt
}

// resolveBase resolves the packages of each layer.
func (b *Builder) resolveBase(ctx context.Context, layers []DebLayer) ([]resolvedLayer, error) {
	out := make([]resolvedLayer, 0, len(layers))
	for _, l := range layers {
		pkgs, err := b.aptClient().packages(ctx, l)
		if errors.Is(err, errStaleLists) && b.aptClient().mayUpdate() {
			if err = b.aptClient().update(ctx); err == nil {
				pkgs, err = b.aptClient().packages(ctx, l)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Name, err)
		}
		key := sha256Hex(func(h hash.Hash) {
			fmt.Fprintf(h, "%s\nlayer %s\ncheck %q\n", formatVersion, l.Name, l.Check)
			if len(l.Compile) > 0 {
				fmt.Fprintf(h, "compile %q\n", l.Compile)
			}
			for _, p := range pkgs {
				fmt.Fprintln(h, p)
			}
		})
		out = append(out, resolvedLayer{layer: l, pkgs: pkgs, key: key})
	}
	return out, nil
}

// packages returns the packages of l, sorted by name: the closure of l.WithDependencies and
// l.Packages, at the versions apt would install.
func (a *apt) packages(ctx context.Context, l DebLayer) ([]pkg, error) {
	byName := map[string]pkg{}
	if len(l.WithDependencies) > 0 {
		closure, err := a.closure(ctx, l.WithDependencies, l.Omit)
		if err != nil {
			return nil, err
		}
		for _, p := range closure {
			byName[p.Name] = p
		}
	}
	if len(l.Packages) > 0 {
		explicit, err := a.candidates(ctx, l.Packages)
		if err != nil {
			return nil, err
		}
		for _, p := range explicit {
			byName[p.Name] = p
		}
	}
	pkgs := make([]pkg, 0, len(byName))
	for _, n := range sortedKeys(byName) {
		pkgs = append(pkgs, byName[n])
	}
	return pkgs, nil
}

// instLine is a line of apt-get --simulate: "Inst libc6 (2.36-9+deb12u9 Debian:12.9/stable [amd64])".
var instLine = regexp.MustCompile(`^Inst (\S+) \((\S+) .*\[([a-z0-9]+)\]\)`)

// closure asks apt which packages it would install for names on a system with nothing installed
// but omit: apt-get --simulate with a dpkg status file that lists only omit, at the versions apt
// would install.
func (a *apt) closure(ctx context.Context, names, omit []string) ([]pkg, error) {
	memo := "closure " + strings.Join(sortedStrings(names), " ")
	if len(omit) > 0 {
		memo += " omit " + strings.Join(sortedStrings(omit), " ")
	}
	if pkgs, ok := a.recall(memo); ok {
		return pkgs, nil
	}
	var installed bytes.Buffer
	if len(omit) > 0 {
		omitted, err := a.candidates(ctx, omit)
		if err != nil {
			return nil, err
		}
		for _, p := range omitted {
			fmt.Fprintf(&installed, "Package: %s\nStatus: install ok installed\nVersion: %s\nArchitecture: %s\n\n", p.Name, p.Version, p.Arch)
		}
	}
	status := filepath.Join(a.cacheDir, "images", "dpkg-status-"+sha256Hex(func(h hash.Hash) { h.Write(installed.Bytes()) })[:16])
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(status, installed.Bytes(), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--simulate", "-o", "Dir::State::Status=" + status, "-o", "Debug::NoLocking=true",
		"install", "--no-install-recommends"}, names...)
	out, err := a.run(ctx, "", "apt-get", args...)
	if err != nil {
		return nil, err
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := instLine.FindStringSubmatch(sc.Text()); m != nil {
			pkgs = append(pkgs, pkg{Name: m[1], Version: m[2], Arch: m[3]})
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("apt-get %s installs nothing:\n%s", strings.Join(args, " "), out)
	}
	a.remember(memo, pkgs)
	return pkgs, nil
}

// candidates returns the version apt would install of each of names, without dependencies.
func (a *apt) candidates(ctx context.Context, names []string) ([]pkg, error) {
	memo := "candidates " + strings.Join(sortedStrings(names), " ")
	if pkgs, ok := a.recall(memo); ok {
		return pkgs, nil
	}
	out, err := a.run(ctx, "", "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, err
	}
	var pkgs []pkg
	for _, stanza := range strings.Split(string(out), "\n\n") {
		var p pkg
		for _, line := range strings.Split(stanza, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "Package":
				p.Name = v
			case "Version":
				p.Version = v
			case "Architecture":
				p.Arch = v
			}
		}
		if p.Name != "" {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) != len(names) {
		return nil, fmt.Errorf("apt-cache show %s: %d packages, want %d: %w", strings.Join(names, " "), len(pkgs), len(names), errStaleLists)
	}
	a.remember(memo, pkgs)
	return pkgs, nil
}

// recall returns what memo resolved to, in this build or in an earlier one with the same package
// lists: apt-get --simulate on an empty system takes seconds.
func (a *apt) recall(memo string) ([]pkg, bool) {
	if pkgs, ok := a.resolved[memo]; ok {
		return pkgs, true
	}
	data, err := os.ReadFile(a.memoFile(memo))
	if err != nil {
		return nil, false
	}
	var pkgs []pkg
	if json.Unmarshal(data, &pkgs) != nil || len(pkgs) == 0 {
		return nil, false
	}
	a.resolved[memo] = pkgs
	return pkgs, true
}

// remember records what memo resolved to, for recall.
func (a *apt) remember(memo string, pkgs []pkg) {
	a.resolved[memo] = pkgs
	if data, err := json.Marshal(pkgs); err == nil {
		file := a.memoFile(memo)
		if os.MkdirAll(filepath.Dir(file), 0o755) == nil {
			_ = os.WriteFile(file, data, 0o644)
		}
	}
}

// memoFile is where remember keeps memo's answer: named after memo and the state of apt's
// configuration and package lists (names, sizes and times), which apt-get update changes.
func (a *apt) memoFile(memo string) string {
	if a.listsKey == "" {
		a.listsKey = sha256Hex(func(h hash.Hash) {
			for _, pattern := range []string{"/etc/apt/sources.list", "/etc/apt/sources.list.d/*",
				"/etc/apt/preferences", "/etc/apt/preferences.d/*", "/etc/apt/apt.conf.d/*", "/var/lib/apt/lists/*"} {
				files, _ := filepath.Glob(pattern)
				for _, f := range files {
					if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
						fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
					}
				}
			}
		})
	}
	key := sha256Hex(func(h hash.Hash) { fmt.Fprintf(h, "%s\n%s\n%s\n", formatVersion, a.listsKey, memo) })
	return filepath.Join(a.cacheDir, "images", "apt", key[:32]+".json")
}

// mayUpdate reports whether update may run: once per build, as root.
func (a *apt) mayUpdate() bool { return !a.updated && os.Geteuid() == 0 }

// update runs apt-get update and forgets what was resolved with the old lists.
func (a *apt) update(ctx context.Context) error {
	a.updated = true
	a.log("apt-get update: the package lists miss a package or a version")
	if _, err := a.run(ctx, "", "apt-get", "update"); err != nil {
		return err
	}
	a.resolved, a.listsKey = map[string][]pkg{}, ""
	return nil
}

// run runs an apt command in dir, in the C locale, and returns its output. A package apt does not
// know is reported as errStaleLists.
func (a *apt) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%s %s: %w:\n%s", name, strings.Join(args, " "), err, tail(out, 20))
		if bytes.Contains(out, []byte("Unable to locate package")) || bytes.Contains(out, []byte("No packages found")) ||
			bytes.Contains(out, []byte("has no installation candidate")) || bytes.Contains(out, []byte("404")) {
			err = fmt.Errorf("%w (%w: run apt-get update)", err, errStaleLists)
		}
	}
	return out, err
}

// download puts the .deb of every package of pkgs that is not there yet into <CacheDir>/debs.
func (a *apt) download(ctx context.Context, pkgs []pkg) error {
	debs := filepath.Join(a.cacheDir, "debs")
	var missing []pkg
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(debs, p.debFile())); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// Into a directory of its own, so that an interrupted download leaves no partial .deb in debs.
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	partial, err := os.MkdirTemp(debs, ".partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(partial)
	args := []string{"download", "-o", "APT::Sandbox::User=root", "-o", "Debug::NoLocking=true"}
	for _, p := range missing {
		args = append(args, p.Name+"="+p.Version)
	}
	began := time.Now()
	if _, err := a.run(ctx, partial, "apt-get", args...); err != nil {
		return err
	}
	for _, p := range missing {
		if err := os.Rename(filepath.Join(partial, p.debFile()), filepath.Join(debs, p.debFile())); err != nil {
			return fmt.Errorf("apt-get download %s: %w", p, err)
		}
	}
	a.log("downloaded %d packages in %.1fs", len(missing), time.Since(began).Seconds())
	return nil
}

// debLayer returns the layer of rl's packages, from the cache or built and cached.
func (b *Builder) debLayer(ctx context.Context, rl resolvedLayer) (*cachedLayer, error) {
	file := rl.file(b.CacheDir)
	if l := openCachedLayer(file); l != nil {
		return b.cached(file, nil)
	}
	began := time.Now()
	b.logf("layer %s: %d Debian packages", rl.layer.Name, len(rl.pkgs))
	err := b.aptClient().download(ctx, rl.pkgs)
	if errors.Is(err, errStaleLists) && b.aptClient().mayUpdate() {
		// The lists name versions the mirror has replaced: resolve again with fresh lists.
		if err = b.aptClient().update(ctx); err == nil {
			var fresh []resolvedLayer
			if fresh, err = b.resolveBase(ctx, []DebLayer{rl.layer}); err == nil {
				return b.debLayer(ctx, fresh[0])
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", rl.layer.Name, err)
	}
	rootfs := stagingDir(filepath.Join(b.CacheDir, "images", "rootfs"), rl.layer.Name+"-"+rl.key[:16])
	if err := os.RemoveAll(rootfs); err != nil {
		return nil, err
	}
	defer os.RemoveAll(rootfs)
	step := time.Now()
	if err := b.extract(ctx, rl, rootfs); err != nil {
		return nil, fmt.Errorf("layer %s: %w", rl.layer.Name, err)
	}
	b.logf("layer %s: extracted into %s in %.1fs", rl.layer.Name, rootfs, time.Since(step).Seconds())
	if len(rl.layer.Compile) > 0 {
		step = time.Now()
		// The image's own Python, as root (the tree is root's), with a fixed hash seed so that set
		// constants are written in one order.
		compile := append([]string{"/usr/bin/python3", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"}, rl.layer.Compile...)
		if _, err := runInAs(ctx, rootfs, "0:0", []string{"PYTHONHASHSEED=0"}, compile); err != nil {
			return nil, fmt.Errorf("layer %s: %w", rl.layer.Name, err)
		}
		b.logf("layer %s: byte-compiled %v in %.1fs", rl.layer.Name, rl.layer.Compile, time.Since(step).Seconds())
	}
	if len(rl.layer.Check) > 0 {
		step = time.Now()
		if _, err := runIn(ctx, rootfs, nil, rl.layer.Check); err != nil {
			return nil, fmt.Errorf("layer %s: %w", rl.layer.Name, err)
		}
		b.logf("layer %s: %q passed in %.1fs", rl.layer.Name, rl.layer.Check, time.Since(step).Seconds())
	}
	step = time.Now()
	l, err := b.cached(file, func(tw *tar.Writer) error { return tarTree(tw, rootfs) })
	if err != nil {
		return nil, err
	}
	b.logf("layer %s: packed in %.1fs, %s compressed; built in %.1fs", rl.layer.Name, time.Since(step).Seconds(),
		HumanSize(l.size), time.Since(began).Seconds())
	return l, nil
}

// extract unpacks every package of rl into rootfs with dpkg-deb, then does what the images need
// of their maintainer scripts.
func (b *Builder) extract(ctx context.Context, rl resolvedLayer, rootfs string) error {
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	alts := alternatives{}
	control := filepath.Join(rootfs, "DEBIAN")
	for _, p := range rl.pkgs {
		deb := filepath.Join(b.CacheDir, "debs", p.debFile())
		// -R is -x plus the control files in DEBIAN/, read for the alternatives and removed.
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-R", deb, rootfs).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -R %s: %w: %s", deb, err, out)
		}
		if script, err := os.ReadFile(filepath.Join(control, "postinst")); err == nil {
			alts.parse(string(script))
		}
		if err := os.RemoveAll(control); err != nil {
			return err
		}
	}
	if err := alts.link(rootfs); err != nil {
		return err
	}
	return writeCABundle(rootfs)
}

// alternatives are the links update-alternatives would make: link → the best candidate.
type alternatives map[string]alternative

type alternative struct {
	name, path string
	priority   int
}

// parse records the "update-alternatives --install LINK NAME PATH PRIORITY" of a maintainer
// script whose arguments are literal (no shell variables).
func (a alternatives) parse(script string) {
	script = strings.ReplaceAll(script, "\\\n", " ")
	for _, line := range strings.Split(script, "\n") {
		if !strings.Contains(line, "update-alternatives") {
			continue
		}
		words := strings.Fields(strings.NewReplacer(`"`, "", `'`, "").Replace(line))
		for i, w := range words {
			if w != "--install" || i+4 >= len(words) {
				continue
			}
			link, name, target := words[i+1], words[i+2], words[i+3]
			prio, err := strconv.Atoi(words[i+4])
			if err != nil || strings.Contains(link+name+target, "$") {
				continue
			}
			if cur, ok := a[link]; !ok || prio > cur.priority {
				a[link] = alternative{name: name, path: target, priority: prio}
			}
		}
	}
}

// link makes each alternative's links, LINK → /etc/alternatives/NAME → PATH, as dpkg would.
func (a alternatives) link(rootfs string) error {
	for _, link := range sortedKeys(a) {
		alt := a[link]
		if _, err := os.Lstat(filepath.Join(rootfs, alt.path)); err != nil {
			continue // the candidate's package is not in the layer
		}
		pairs := [][2]string{
			{path.Join("/etc/alternatives", alt.name), alt.path},
			{link, path.Join("/etc/alternatives", alt.name)},
		}
		for _, p := range pairs {
			dst := filepath.Join(rootfs, p[0])
			if fi, err := os.Lstat(dst); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				return fmt.Errorf("alternative %s: %s exists and is not a link", alt.name, p[0])
			}
			_ = os.Remove(dst)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(p[1], dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeCABundle joins the certificates under /usr/share/ca-certificates into
// /etc/ssl/certs/ca-certificates.crt, as update-ca-certificates does with its default
// configuration (every certificate trusted), when the ca-certificates package is in the tree.
func writeCABundle(rootfs string) error {
	src := filepath.Join(rootfs, "usr", "share", "ca-certificates")
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	var certs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			certs = append(certs, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(certs)
	var bundle bytes.Buffer
	for _, c := range certs {
		pem, err := os.ReadFile(c)
		if err != nil {
			return err
		}
		bundle.Write(bytes.TrimRight(pem, "\n"))
		bundle.WriteByte('\n')
	}
	dst := filepath.Join(rootfs, "etc", "ssl", "certs", "ca-certificates.crt")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, bundle.Bytes(), 0o644)
}

// runIn runs command chrooted in rootfs as NonRoot, in a mount namespace of its own where /dev
// and /proc are mounted, with PATH, HOME=/nonexistent, LANG=C.UTF-8,
// PYTHONDONTWRITEBYTECODE=1 and env as its environment, and returns its output.
func runIn(ctx context.Context, rootfs string, env, command []string) ([]byte, error) {
	return runInAs(ctx, rootfs, NonRoot, env, command)
}

// runInAs is runIn as user (chroot --userspec).
func runInAs(ctx context.Context, rootfs, user string, env, command []string) ([]byte, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("running %q in %s needs root (chroot, mount)", command, rootfs)
	}
	for _, d := range []string{"dev", "proc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return nil, err
		}
	}
	script := `mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" && exec chroot --userspec=` + user + ` "$0" "$@"`
	args := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, rootfs}, command...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append([]string{defaultPath, "HOME=/nonexistent", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("running %q in %s: %w:\n%s", command, rootfs, err, tail(out, 30))
	}
	return out, nil
}

// checkLinkage refuses an image whose dynamically linked executable has no libc6 under it.
func checkLinkage(s Spec, bases []resolvedLayer) error {
	for _, rl := range bases {
		if rl.has("libc6") {
			return nil
		}
	}
	for _, f := range s.Files {
		if dynamic, err := isDynamicELF(f.Src); err != nil {
			return err
		} else if dynamic {
			return fmt.Errorf("%s is dynamically linked and the image has no libc6: build it with CGO_ENABLED=0 or give the image GlibcBase", f.Src)
		}
	}
	return nil
}

// isDynamicELF reports whether the file is an ELF executable with a program interpreter.
func isDynamicELF(file string) (bool, error) {
	f, err := elf.Open(file)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return false, nil // not ELF: a script or data
		}
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stagingMinFree is the free memory /dev/shm must have for stagingDir to pick it: room for the
// largest layer's tree (the trainer's, about 1.8 GB) and more.
const stagingMinFree = 4 << 30

// stagingDir returns a directory named after name and this process to extract packages into: in
// /dev/shm when it is a memory file system with room, since writing, reading and removing tens of
// thousands of files there costs a fraction of what it costs on disk; else under fallback.
func stagingDir(fallback, name string) string {
	name = fmt.Sprintf("%s-%d", name, os.Getpid())
	var fs syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs("/dev/shm", &fs); err == nil && fs.Type == tmpfsMagic &&
		fs.Bavail*uint64(fs.Bsize) > stagingMinFree {
		return filepath.Join("/dev/shm", "convoy-images-"+name)
	}
	return filepath.Join(fallback, name)
}

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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// cachedLayer is a gzip-compressed tar layer in a file, with the digests computed as it was
// written, so that using it costs no second read.
type cachedLayer struct {
	path   string
	digest v1.Hash
	diffID v1.Hash
	size   int64
}

var _ v1.Layer = (*cachedLayer)(nil)

func (l *cachedLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *cachedLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *cachedLayer) Size() (int64, error)                { return l.size, nil }
func (l *cachedLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *cachedLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

func (l *cachedLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", l.path, err)
	}
	return readCloser{Reader: zr, close: func() error { return errors.Join(zr.Close(), f.Close()) }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// linkInto hard-links the layer's file to dst, a layout's blob, unless dst exists. When a link
// cannot be made (another file system), the layout copies the layer instead.
func (l *cachedLayer) linkInto(dst string) error {
	if fi, err := os.Stat(dst); err == nil && fi.Size() == l.size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst)
	if err := os.Link(l.path, dst); err != nil && !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("linking layer %s: %w", l.path, err)
	}
	return nil
}

// layerMeta is the sidecar <layer>.json of a cached layer file.
type layerMeta struct {
	Digest string `json:"digest"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

// openCachedLayer returns the layer cached at path, or nil when there is none.
func openCachedLayer(path string) *cachedLayer {
	data, err := os.ReadFile(path + ".json")
	if err != nil {
		return nil
	}
	var m layerMeta
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	digest, err1 := v1.NewHash(m.Digest)
	diffID, err2 := v1.NewHash(m.DiffID)
	fi, err3 := os.Stat(path)
	if err1 != nil || err2 != nil || err3 != nil || fi.Size() != m.Size {
		return nil
	}
	return &cachedLayer{path: path, digest: digest, diffID: diffID, size: m.Size}
}

// writeLayer writes the tar stream fill produces, gzip-compressed, to path (through a temporary
// file, so that path is complete or missing) with its sidecar of digests.
func writeLayer(path string, fill func(tw *tar.Writer) error) (*cachedLayer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Chmod(0o644); err != nil {
		return nil, err
	}

	compressed, uncompressed := sha256.New(), sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, compressed)}
	zw, err := gzip.NewWriterLevel(counter, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	if err := fill(tw); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l := &cachedLayer{
		path:   path,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
		size:   counter.n,
	}
	meta, err := json.Marshal(layerMeta{Digest: l.digest.String(), DiffID: l.diffID.String(), Size: l.size})
	if err != nil {
		return nil, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, err
	}
	return l, os.WriteFile(path+".json", meta, 0o644)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Users, as distroless lays them out: root, nobody and nonroot (65532), whose home is the only
// directory besides /tmp it can write to.
const (
	passwdFile   = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	groupFile    = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	nsswitchFile = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"
	usersFiles   = passwdFile + groupFile + nsswitchFile
)

// usersLayer is the layer every image has above its base: /etc/passwd, /etc/group,
// /etc/nsswitch.conf, /root, /home/nonroot and /tmp.
func (b *Builder) usersLayer() (*cachedLayer, error) {
	sum := sha256.Sum256([]byte(formatVersion + usersFiles))
	file := filepath.Join(b.CacheDir, "images", "layers", "users-"+hex.EncodeToString(sum[:8])+".tar.gz")
	return b.cached(file, func(tw *tar.Writer) error {
		entries := []*tar.Header{
			dirHeader("etc/", 0o755, 0),
			fileHeader("etc/group", 0o644, len(groupFile)),
			fileHeader("etc/nsswitch.conf", 0o644, len(nsswitchFile)),
			fileHeader("etc/passwd", 0o644, len(passwdFile)),
			dirHeader("home/", 0o755, 0),
			dirHeader("home/nonroot/", 0o700, 65532),
			dirHeader("root/", 0o700, 0),
			dirHeader("tmp/", 0o1777, 0),
		}
		content := map[string]string{"etc/group": groupFile, "etc/nsswitch.conf": nsswitchFile, "etc/passwd": passwdFile}
		for _, h := range entries {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, content[h.Name]); err != nil {
				return err
			}
		}
		return nil
	})
}

// cached returns the layer cached in file, building it with fill when it is missing.
func (b *Builder) cached(file string, fill func(tw *tar.Writer) error) (*cachedLayer, error) {
	if l := b.layers[file]; l != nil {
		return l, nil
	}
	l := openCachedLayer(file)
	if l == nil {
		var err error
		if l, err = writeLayer(file, fill); err != nil {
			return nil, fmt.Errorf("writing layer %s: %w", file, err)
		}
	}
	if b.layers == nil {
		b.layers = map[string]*cachedLayer{}
	}
	b.layers[file] = l
	return l, nil
}

// appLayer is the layer of s's Files and Dirs, with the directories above them, rewritten on
// every build of the image.
func (b *Builder) appLayer(s Spec) (*cachedLayer, error) {
	type entry struct {
		hdr *tar.Header
		src string
	}
	entries := map[string]entry{}
	addParents := func(dst string) {
		for dir := path.Dir(dst); dir != "/"; dir = path.Dir(dir) {
			name := strings.TrimPrefix(dir, "/") + "/"
			entries[name] = entry{hdr: dirHeader(name, 0o755, 0)}
		}
	}
	for _, f := range s.Files {
		fi, err := os.Stat(f.Src)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", f.Src)
		}
		addParents(f.Dst)
		name := strings.TrimPrefix(path.Clean(f.Dst), "/")
		entries[name] = entry{hdr: fileHeader(name, int64(f.Mode.Perm()), int(fi.Size())), src: f.Src}
	}
	for _, d := range s.Dirs {
		addParents(d.Dst)
		base := strings.TrimPrefix(path.Clean(d.Dst), "/")
		err := filepath.WalkDir(d.Src, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(d.Src, p)
			name := path.Join(base, filepath.ToSlash(rel))
			info, err := de.Info()
			if err != nil {
				return err
			}
			switch {
			case de.IsDir():
				entries[name+"/"] = entry{hdr: dirHeader(name+"/", 0o755, 0)}
			case de.Type()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				h := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch}
				entries[name] = entry{hdr: h}
			case de.Type().IsRegular():
				mode := int64(0o644)
				if info.Mode()&0o111 != 0 {
					mode = 0o755
				}
				entries[name] = entry{hdr: fileHeader(name, mode, int(info.Size())), src: p}
			default:
				return fmt.Errorf("%s: not a regular file, directory or symlink", p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("copying %s: %w", d.Src, err)
		}
	}
	file := filepath.Join(b.CacheDir, "images", "app", s.Name+".tar.gz")
	return writeLayer(file, func(tw *tar.Writer) error {
		for _, name := range sortedKeys(entries) {
			e := entries[name]
			if err := tw.WriteHeader(e.hdr); err != nil {
				return err
			}
			if e.src == "" {
				continue
			}
			if err := copyFile(tw, e.src, e.hdr.Size); err != nil {
				return err
			}
		}
		return nil
	})
}

func copyFile(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("%s changed size while it was copied", src)
	}
	return nil
}

func dirHeader(name string, mode int64, owner int) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner, ModTime: epoch}
}

func fileHeader(name string, mode int64, size int) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(size), ModTime: epoch}
}

// tarTree writes the tree under root to tw as a layer's root file system, keeping owners, modes,
// symbolic and hard links, with every time set to epoch.
func tarTree(tw *tar.Writer, root string) error {
	links := map[uint64]string{} // inode → name of its first path
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		var target string
		if info.Mode()&os.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name, h.Uname, h.Gname = name, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
			if info.Mode().IsRegular() && st.Nlink > 1 {
				if first, ok := links[st.Ino]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					links[st.Ino] = name
				}
			}
		}
		switch {
		case d.IsDir():
			h.Name += "/"
		case h.Typeflag == tar.TypeReg:
		case h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink:
		default:
			return fmt.Errorf("%s: a %v cannot go in a layer", p, info.Mode().Type())
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			return copyFile(tw, p, h.Size)
		}
		return nil
	})
}

// sha256Hex is the hex SHA-256 of what hashes wrote, for keys.
func sha256Hex(write func(h hash.Hash)) string {
	h := sha256.New()
	write(h)
	return hex.EncodeToString(h.Sum(nil))
}

// sortedStrings returns a sorted copy of s.
func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

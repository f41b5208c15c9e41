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

// Command images builds Convoy's container images without Docker (see test/images) and pushes them
// to a registry:
//
//	images build [--only NAME,...]                          OCI layouts in bin/images/ (what `make images` runs)
//	images push --registry HOST:PORT [--only NAME,...]      build what is stale, then push over plain HTTP
//	images release --registry REPOSITORY [--insecure]       build what is stale, then push the release's
//	                                                        images as REPOSITORY/<name>:v<VERSION>
//	                                                        (what `make images REGISTRY=...` runs)
//
// The images are made from the binaries in bin/ (`make bin`) and Debian packages, which apt-get
// downloads into .cache/debs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		_, err = build(ctx, args)
	case "push":
		err = push(ctx, args)
	case "release":
		err = release(ctx, args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: images build [--root DIR] [--bin-dir DIR] [--only NAME,...]
       images push --registry HOST:PORT [--root DIR] [--bin-dir DIR] [--only NAME,...]
       images release --registry REPOSITORY [--insecure] [--root DIR] [--bin-dir DIR]`)
	os.Exit(2)
}

// options are the flags build and push share.
type options struct {
	root, binDir, only string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.root, "root", "", "repository root (default: the nearest directory with a go.mod)")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory of the binaries (default: <root>/bin)")
	fs.StringVar(&o.only, "only", "", "comma-separated images to build (default: all)")
}

func build(ctx context.Context, args []string) (*built, error) {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var o options
	o.register(fs)
	_ = fs.Parse(args)
	return o.build(ctx)
}

// built is what a build made, for push.
type built struct {
	builder *images.Builder
	names   []string
}

func (o *options) build(ctx context.Context) (*built, error) {
	if o.root == "" {
		var err error
		if o.root, err = framework.RepoRoot(); err != nil {
			return nil, err
		}
	}
	if o.binDir == "" {
		o.binDir = filepath.Join(o.root, "bin")
	}
	var names []string
	if o.only != "" {
		names = strings.Split(o.only, ",")
	}
	specs, err := images.Select(images.Specs(o.root, o.binDir), names)
	if err != nil {
		return nil, err
	}
	b := images.NewBuilder(o.root)
	b.Log = os.Stderr
	began := time.Now()
	results, err := b.Build(ctx, specs)
	if err != nil {
		return nil, err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tSIZE\tBUILD\tDIGEST")
	for _, r := range results {
		how := fmt.Sprintf("%.1fs", r.Duration.Seconds())
		if r.Cached {
			how = "up to date"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, images.HumanSize(r.Size), how, r.Digest)
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	fmt.Printf("%d images in %s (%.1fs)\n", len(results), b.OutDir, time.Since(began).Seconds())
	return &built{builder: b, names: images.Names(specs)}, nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	var o options
	o.register(fs)
	registry := fs.String("registry", "", "registry to push to, HOST:PORT, plain HTTP (required)")
	_ = fs.Parse(args)
	if *registry == "" {
		return fmt.Errorf("--registry is required")
	}
	b, err := o.build(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	digests, err := images.Push(ctx, b.builder.OutDir, *registry, b.names)
	if err != nil {
		return err
	}
	for _, n := range b.names {
		fmt.Printf("%s@%s\n", images.Ref(*registry, n), digests[n])
	}
	fmt.Printf("pushed %d images to %s in %.1fs\n", len(b.names), *registry, time.Since(began).Seconds())
	return nil
}

// release builds the release's images and pushes them as REPOSITORY/<name>:v<VERSION>, with the
// Docker configuration's credentials.
func release(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	var o options
	o.register(fs)
	repository := fs.String("registry", "", "where to push, a registry and a path, such as ghcr.io/acme (required)")
	insecure := fs.Bool("insecure", false, "push over plain HTTP")
	_ = fs.Parse(args)
	if *repository == "" {
		return fmt.Errorf("--registry is required, for example ghcr.io/acme")
	}
	o.only = strings.Join(images.Release, ",")
	b, err := o.build(ctx)
	if err != nil {
		return err
	}
	version, err := images.Version(o.root)
	if err != nil {
		return err
	}
	digests, err := images.Publish(ctx, b.builder.OutDir, *repository, version, *insecure)
	if err != nil {
		return err
	}
	for _, n := range images.Release {
		fmt.Printf("%s@%s\n", images.ReleaseRef(*repository, n, version), digests[n])
	}
	fmt.Printf("set newName to %s/<name> and newTag to v%s in deploy/images/kustomization.yaml, or helm's image.registry=%s\n", *repository, version, *repository)
	return nil
}

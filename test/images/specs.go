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
	"fmt"
	"path/filepath"
	"strings"
)

// The Debian layers the images start from.
var (
	// StaticLayer is what distroless/static holds: os-release and the rest of base-files,
	// /etc/services and /etc/protocols (netbase), time zones (tzdata) and the CA certificates.
	StaticLayer = DebLayer{Name: "static", Packages: []string{"base-files", "netbase", "tzdata", "ca-certificates"}}
	// GlibcLayer is the C library and what it needs (libgcc-s1): for executables built with cgo,
	// and for go-nvml, which dlopens the NVIDIA driver's libnvidia-ml.so.1.
	GlibcLayer = DebLayer{Name: "glibc", WithDependencies: []string{"libc6"}}
	// TrainerLayer is Python with PyTorch (CPU), NumPy, scikit-learn, boto3 (the SDK's S3 client)
	// and OpenBLAS, checked by importing them. SciPy depends on Pythran, a compiler, and through
	// it on GCC, Boost's headers and Python's: a quarter of the layer, which nothing runs.
	TrainerLayer = DebLayer{
		Name:             "python-torch",
		WithDependencies: []string{"python3", "python3-torch", "python3-numpy", "python3-sklearn", "python3-boto3", "libopenblas0-pthread"},
		Omit:             []string{"python3-pythran"},
		Compile:          []string{"/usr/lib/python3/dist-packages", "/usr/lib/python3.11"},
		Check:            []string{"/usr/bin/python3", "-c", "import boto3, numpy, sklearn.datasets, torch; torch.ones(2) @ torch.ones(2)"},
	}
)

// The bases of the images.
var (
	// StaticBase is for static executables (CGO_ENABLED=0).
	StaticBase = []DebLayer{StaticLayer}
	// GlibcBase is for executables linked against glibc.
	GlibcBase = []DebLayer{StaticLayer, GlibcLayer}
	// TrainerBase is for Python training scripts.
	TrainerBase = []DebLayer{StaticLayer, TrainerLayer}
)

// Names of the images Specs returns.
const (
	Operator  = "convoy-operator"
	Scheduler = "convoy-scheduler"
	NodeAgent = "convoy-node-agent"
	DRADriver = "convoy-dra-driver"
	Pause     = "pause"
	CoreDNS   = "coredns"
	Kueue     = "kueue"
	Trainer   = "convoy-trainer"
)

// Paths of the trainer's sources in the repository, and where the image has them.
const (
	TrainerAppDir   = "examples/pytorch-digits"
	TrainerSDKDir   = "sdk/python/src/convoy"
	trainerAppDst   = "/app"
	trainerSDKRoot  = "/opt/convoy/sdk"
	trainerSDKDst   = trainerSDKRoot + "/convoy"
	trainerPythonEx = "/usr/bin/python3"
)

// Specs returns Convoy's images, made from the binaries in binDir (what `make bin` builds) and the
// trainer's sources under root.
func Specs(root, binDir string) []Spec {
	return []Spec{
		binaryImage(binDir, Operator, GlibcBase, "Convoy's TrainingJob operator",
			[]string{"8443/tcp", "8081/tcp", "9443/tcp", "9444/tcp"}),
		binaryImage(binDir, Scheduler, GlibcBase, "Convoy's kube-scheduler with its gang plugins",
			[]string{"10259/tcp"}),
		withEnv(binaryImage(binDir, NodeAgent, GlibcBase, "Convoy's GPU node agent",
			[]string{"9400/tcp"}), "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility"),
		binaryImage(binDir, DRADriver, GlibcBase, "Convoy's DRA driver for simulated GPUs", nil),
		binaryImage(binDir, Pause, StaticBase, "Pod sandbox (pause) container", nil),
		CoreDNSSpec(binDir),
		KueueSpec(binDir),
		TrainerSpec(filepath.Join(root, TrainerAppDir), filepath.Join(root, TrainerSDKDir)),
	}
}

// binaryImage is an image of one executable, bin/<name>, run as /<name>.
func binaryImage(binDir, name string, base []DebLayer, description string, ports []string) Spec {
	return Spec{
		Name:        name,
		Description: description,
		Base:        base,
		Files:       []File{{Src: filepath.Join(binDir, name), Dst: "/" + name, Mode: 0o755}},
		Entrypoint:  []string{"/" + name},
		Ports:       ports,
	}
}

func withEnv(s Spec, env ...string) Spec {
	s.Env = append(s.Env, env...)
	return s
}

// CoreDNSSpec is CoreDNS (bin/coredns, linked against glibc like every binary of the one go build
// in test/framework) reading /etc/coredns/Corefile, which the pod mounts from a ConfigMap.
func CoreDNSSpec(binDir string) Spec {
	s := binaryImage(binDir, CoreDNS, GlibcBase, "CoreDNS, the cluster DNS", []string{"53/tcp", "53/udp"})
	s.Cmd = []string{"-conf", "/etc/coredns/Corefile"}
	return s
}

// KueueSpec is the Kueue manager (bin/kueue) as Kueue's own image lays it out: /manager, which
// Kueue's release manifests run.
func KueueSpec(binDir string) Spec {
	return Spec{
		Name:        Kueue,
		Description: "Kueue's controller manager",
		Base:        GlibcBase,
		Files:       []File{{Src: filepath.Join(binDir, "kueue"), Dst: "/manager", Mode: 0o755}},
		Entrypoint:  []string{"/manager"},
	}
}

// TrainerSpec is the PyTorch training image: appDir (the training script, train.py) in /app and
// the Python SDK's package sdkDir in /opt/convoy/sdk/convoy, on PYTHONPATH.
func TrainerSpec(appDir, sdkDir string) Spec {
	return Spec{
		Name:        Trainer,
		Description: "PyTorch training image with Convoy's Python SDK",
		Base:        TrainerBase,
		Dirs:        []Dir{{Src: appDir, Dst: trainerAppDst}, {Src: sdkDir, Dst: trainerSDKDst}},
		Entrypoint:  []string{trainerPythonEx, trainerAppDst + "/train.py"},
		Env:         []string{"PYTHONPATH=" + trainerSDKRoot, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"},
		WorkingDir:  trainerAppDst,
	}
}

// Select returns the specs called names, in the order of names; all of specs when names is empty.
func Select(specs []Spec, names []string) ([]Spec, error) {
	if len(names) == 0 {
		return specs, nil
	}
	byName := map[string]Spec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	out := make([]Spec, 0, len(names))
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("no image called %q (images: %s)", n, strings.Join(Names(specs), ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

# Convoy's one entry point. `make demo` and `make test` are the two commands a newcomer needs; both
# build what they use from the Go modules pinned in go.mod (Go, gcc and make are all a machine needs).

SHELL        := /usr/bin/env bash
COMMA        := ,
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
ROOT         := $(CURDIR)
BIN          := $(ROOT)/bin
# The release: images are tagged v$(VERSION), and the chart's appVersion is the same.
VERSION      := $(shell cat $(ROOT)/VERSION)
STATE        ?= $(ROOT)/.convoy
export KUBEBUILDER_ASSETS := $(BIN)
# No absolute path of the checkout in what is compiled: a fresh clone in another folder reuses the
# packages Go's build cache holds from the last one (docs/testing.md#time-budget).
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

# Packages whose tests need no control plane.
# The public GPU cluster trace bench-trace replays (shared/ beside the repository).
TRACE_DIR    ?= ../shared/traces/alibaba-gpu-2023
UNIT_PKGS     = $(shell $(GO) list ./... | grep -v '/test/') ./test/bench/trace ./test/bench/scheduler
# Packages whose tests start the real control plane from test/framework.
INTEG_PKGS    = $(shell $(GO) list ./test/... | grep -v -e '/test/cmd/' -e '/test/e2e' -e '/test/bench/' -e '/test/chaos')
# The whole stack (Kueue, operator, scheduler, node agents) end to end, on kwok's fake nodes.
E2E_PKGS      = $(shell $(GO) list ./test/e2e/... | grep -v -e '/test/e2e/real' -e '/test/e2e/adoption') ./test/chaos
# The real-node tier: real kubelets, containerd and containers from Convoy's images; beside it, on
# a cluster of its own, the README's install blocks run as written on real nodes labelled as
# providers label them.
# The real-node packages: those joined by + run one after the other, on one real-node network; the
# groups run at once, each on its own (CONVOY_REAL_NET).
REAL_PKGS     = ./test/e2e/realnode ./test/e2e/adoption+./test/e2e/realelastic
# What real nodes need from Debian (test/framework/realnode.go's RealNodeBinaries).
REAL_NODE_DEBS = containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux
# make verify runs go vet with every check on every package, test files included: the tiers do not
# vet again (-vet=off).
TEST_FLAGS   ?= -count=1 -timeout=30m -vet=off
# The Kubernetes minor whose kube-apiserver and kube-controller-manager test-e2e runs against: 1.37
# (bin/k8s-1.37/, built from hack/k8s137's go.mod) or 1.36 (go.mod's, in bin/ with everything else).
K8S          ?= 1.37
K8S_137      := v1.37.2
K8S_137_LDFLAGS = -w $(foreach p,component-base/version client-go/pkg/version,-X k8s.io/$(p).gitVersion=$(K8S_137) -X k8s.io/$(p).gitMajor=1 -X k8s.io/$(p).gitMinor=37)
# The fleet size of `make bench-scheduler-dra`.
DRA_NODES    ?= 5000
# The tiers `make test` runs, in order, each timed (hack/tiers.sh): the budget is docs/testing.md#time-budget.
# The 1.37 control plane builds in the background from the start at the lowest CPU priority, in the
# CPU the tiers before test-e2e leave idle (a cold build takes over 10 minutes of both cores).
# The real-node tier runs in the background beside test-integration and test-e2e, once its images
# are built: it mostly waits on kubelets, containers and Lease timeouts, and uses about half a core.
TIERS        ?= $(if $(filter 1.37,$(K8S)),idle:bin-k8s137) verify test-unit test-fuzz test-monitoring bin images bg:test-real test-integration test-e2e

.PHONY: all
all: build

##@ Build

# hack/tiers.sh sets CONVOY_BUILT=bin,images once its bin and images rows have built them, so that
# the tiers after them do not check again.
.PHONY: bin
bin: ## Build the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, Kueue, ...) and Convoy's binaries into bin/, in one go build.
ifeq ($(filter bin,$(subst $(COMMA), ,$(CONVOY_BUILT))),)
	$(GO) run ./test/cmd/localcluster build
endif

.PHONY: bin-k8s137
bin-k8s137: ## kube-apiserver and kube-controller-manager v1.37.2 into bin/k8s-1.37/, from hack/k8s137's own go.mod: the control plane of `make test-e2e`. Holds bin/.k8s137.lock while it builds: `make test` starts it in the background.
	@mkdir -p $(BIN)
	cd hack/k8s137 && flock $(BIN)/.k8s137.lock $(GO) build -o $(BIN)/k8s-1.37/ -ldflags "$(K8S_137_LDFLAGS)" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager

.PHONY: build
build: bin ## Compile every package; Convoy's binaries (convoy-operator, convoy-scheduler, convoy-node-agent) go to bin/.
	$(GO) build ./...

.PHONY: images
images: bin ## Convoy's container images, without Docker, as OCI layouts in bin/images/ (bases from Debian packages; rebuilt only when their inputs change). With REGISTRY=host/path, also pushes the release's images there as <name>:v$(VERSION) (REGISTRY_INSECURE=1: plain HTTP).
ifeq ($(filter images,$(subst $(COMMA), ,$(CONVOY_BUILT))),)
	$(GO) run ./test/cmd/images build
endif
ifneq ($(REGISTRY),)
	$(GO) run ./test/cmd/images release --registry $(REGISTRY) $(if $(REGISTRY_INSECURE),--insecure)
endif

.PHONY: manifests
manifests: ## The release's single install manifest, bin/release/convoy.yaml (CRDs, operator, scheduler, node agent, tenancy), with the images of REGISTRY (default ghcr.io/convoy-dev) at v$(VERSION).
	$(GO) run ./hack/chartgen -manifest $(BIN)/release/convoy.yaml $(if $(REGISTRY),-registry $(REGISTRY))

##@ Code generation

.PHONY: generate
generate: $(BIN)/crd-ref-docs ## Regenerate deepcopy, CRDs and RBAC with controller-gen, the scheduler args' conversions and defaulters with conversion-gen and defaulter-gen, the PodGroup CRD of the scheduler-plugins module go.mod pins, the Helm chart from the kustomize bases (hack/chartgen), and the API reference docs/reference/api.md (crd-ref-docs, built from hack/refdocs).
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... paths=./scheduler-plugin/apis/...
	$(GO) tool conversion-gen --go-header-file hack/boilerplate.go.txt --output-file zz_generated.conversion.go ./scheduler-plugin/apis/config/v1
	$(GO) tool defaulter-gen --go-header-file hack/boilerplate.go.txt --output-file zz_generated.defaults.go ./scheduler-plugin/apis/config/v1
	$(GO) tool controller-gen crd:allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=deploy/crd/bases
	install -m 0644 "$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" deploy/crd/scheduler-plugins/
	$(GO) tool controller-gen rbac:roleName=convoy-operator paths=./operator/... output:rbac:artifacts:config=deploy/operator/rbac
	$(GO) tool controller-gen rbac:roleName=convoy-operator-queue paths=./queue/... output:rbac:artifacts:config=deploy/kueue/rbac
	$(GO) run ./hack/chartgen
	$(BIN)/crd-ref-docs --source-path=./api/v1alpha1 --config=hack/refdocs/config.yaml --renderer=markdown --output-path=docs/reference/api.md --log-level=ERROR

$(BIN)/crd-ref-docs: hack/refdocs/go.mod hack/refdocs/go.sum
	cd hack/refdocs && $(GO) build -o $(BIN)/crd-ref-docs github.com/elastic/crd-ref-docs

# GENERATED lists what make generate writes, with checksums.
GENERATED = find api deploy scheduler-plugin/apis docs/reference -type f \( -name 'zz_generated*' -o -path '*/crd/bases/*' -o -path '*/crd/scheduler-plugins/*' -o -path '*/rbac/role.yaml' -o -path 'deploy/helm/*' -o -path 'docs/reference/*' \) -print0 | sort -z | xargs -0 sha256sum

.PHONY: verify
verify: ## Fail when generated files are stale, go.mod is not tidy, the Markdown names what the code lacks (hack/docscheck), a Go file lacks its license header, or gofmt/go vet complain.
	@before=$$($(GENERATED)); \
	$(MAKE) --no-print-directory generate >/dev/null; \
	after=$$($(GENERATED)); \
	if [ "$$before" != "$$after" ]; then echo "Generated files were stale; 'make generate' has updated them: review and commit."; \
		diff <(echo "$$before") <(echo "$$after") || true; exit 1; fi
	@for m in . hack/k8s137; do (cd $$m && $(GO) mod tidy -diff >/dev/null 2>&1) || { \
		echo "$$m/go.mod or go.sum is not tidy: run 'go mod tidy' there and commit:"; cd $$m && $(GO) mod tidy -diff; exit 1; }; done
	@$(GO) run ./hack/docscheck
	@$(MAKE) --no-print-directory vet

.PHONY: vet
vet: ## gofmt, the license headers, no binary linking both Kueue's and Kubernetes' feature gates, and go vet (make verify runs these).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@hack/headers.sh
	@hack/featuregates.sh
	$(GO) vet ./...

.PHONY: headers
headers: ## Add the license header (hack/boilerplate.go.txt) to every Go file that lacks one.
	hack/headers.sh --fix

$(BIN)/golangci-lint: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# What the SDK's gs:// and az:// stores are tested against (test/integration/sdkstorage):
# fake-gcs-server, built from its own module hack/fakegcs, and Azurite from npm, installed once in
# the cache directory the images use; both in bin/.
CACHE_DIR       ?= $(or $(CONVOY_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/convoy)
AZURITE_VERSION := 3.37.0
AZURITE_DIR     := $(CACHE_DIR)/npm/azurite-$(AZURITE_VERSION)

$(BIN)/fake-gcs-server: hack/fakegcs/go.mod hack/fakegcs/go.sum
	cd hack/fakegcs && $(GO) build -ldflags -w -o $(BIN)/fake-gcs-server github.com/fsouza/fake-gcs-server

.PHONY: cloud-storage-deps
cloud-storage-deps: $(BIN)/fake-gcs-server ## Build fake-gcs-server into bin/; install Azurite (npm) into the cache when missing (Debian's npm first, when missing) and link it into bin/.
	@if [ ! -x "$(AZURITE_DIR)/node_modules/.bin/azurite-blob" ]; then \
		if ! command -v npm >/dev/null; then \
			if [ "$$(id -u)" != 0 ]; then echo "Azurite needs npm (run as root: apt-get install nodejs npm)"; exit 1; fi; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; \
		fi; \
		echo "Installing azurite@$(AZURITE_VERSION) into $(AZURITE_DIR)"; \
		npm install --silent --no-audit --no-fund --prefix "$(AZURITE_DIR)" azurite@$(AZURITE_VERSION); \
	fi
	@ln -sfn "$(AZURITE_DIR)/node_modules/.bin/azurite-blob" $(BIN)/azurite-blob

.PHONY: lint
lint: vet $(BIN)/golangci-lint ## make vet, then golangci-lint with .golangci.yaml (built from hack/tools; not part of make test).
	$(BIN)/golangci-lint run ./...

##@ Test

.PHONY: test
test: ## Every test tier (TIERS), what CI runs; ends with a table of each tier's wall time against the budget.
	@MAKE="$(MAKE)" hack/tiers.sh $(TIERS)

.PHONY: test-unit
test-unit: ## Unit tests: pure logic, no control plane; the Python SDK's tests against a local HTTP(S) server.
	$(GO) test $(TEST_FLAGS) $(UNIT_PKGS)
	python3 -m unittest discover -s sdk/python/tests

# The packages with Go fuzz targets (func FuzzXxx); test-unit runs their seed corpora
# (testdata/fuzz) as plain tests, test-fuzz fuzzes each target for FUZZTIME.
FUZZ_PKGS     = $(addprefix ./,$(sort $(dir $(shell git grep -l '^func Fuzz' -- '*_test.go'))))
# A count of inputs, not a duration: a duration ends the run with "context deadline exceeded" when a
# worker is still busy at the deadline, as it can be on a loaded machine.
FUZZTIME     ?= 300x

.PHONY: test-fuzz
test-fuzz: ## Fuzz each Fuzz target for FUZZTIME (300 inputs; longer: make test-fuzz FUZZTIME=10m); a failing input is written to the package's testdata/fuzz.
	@for pkg in $(FUZZ_PKGS); do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$pkg*_test.go); do \
			echo "== $$target ($$pkg, $(FUZZTIME))"; \
			$(GO) test -vet=off -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# The integration packages run as three sequences at once, each package with its own control plane:
# most of their time is spent waiting on controllers. The packages that build images are in one
# sequence, since two builds of the same Debian layer must not run together; MultiKueue's test (three
# control planes) is a sequence of its own; the sequences take about as long.
INTEG_SEQ_A   = $(shell $(GO) list ./test/framework ./test/images ./test/integration/images ./test/integration/api ./test/integration/chart ./test/integration/frameworks ./test/integration/nodeagent ./test/integration/scheduler)
INTEG_SEQ_C   = $(shell $(GO) list ./test/integration/multikueue)

.PHONY: test-integration
test-integration: bin cloud-storage-deps ## Integration tests against the real kube-apiserver, etcd and kwok built into bin/ (three packages at a time).
	@a=0; b=0; c=0; \
	$(GO) test $(TEST_FLAGS) -p 1 $(INTEG_SEQ_A) & pa=$$!; \
	$(GO) test $(TEST_FLAGS) -p 1 $(filter-out $(INTEG_SEQ_A) $(INTEG_SEQ_C),$(INTEG_PKGS)) & pb=$$!; \
	$(GO) test $(TEST_FLAGS) -p 1 $(INTEG_SEQ_C) & pc=$$!; \
	wait $$pa || a=$$?; wait $$pb || b=$$?; wait $$pc || c=$$?; \
	exit $$(( a || b || c ))

.PHONY: test-e2e
test-e2e: bin $(if $(filter 1.37,$(K8S)),bin-k8s137) monitoring-deps ## End-to-end tests: the real binaries, each with the RBAC in deploy/, on a simulated GPU fleet; a real Prometheus scrapes them. test/e2e and the chaos run at once, each on its own stack, against a 1.37 control plane (K8S=1.36: go.mod's 1.36).
	@case "$(K8S)" in 1.36|1.37) ;; *) echo "K8S=$(K8S): 1.36 or 1.37" >&2; exit 2;; esac
	$(if $(filter 1.37,$(K8S)),CONVOY_CONTROL_PLANE_BIN=$(BIN)/k8s-1.37) CONVOY_REQUIRE_PROMETHEUS=1 $(GO) test $(TEST_FLAGS) -p 2 $(E2E_PKGS)

.PHONY: test-real
test-real: bin images real-node-deps ## The real-node tier (root): two real kubelets with containerd run Convoy's images and a real PyTorch job. Its packages run at once, each on a real-node network of its own (CONVOY_REAL_NET).
	@net=0; pids=; for group in $(REAL_PKGS); do \
		(rc=0; for pkg in $$(echo $$group | tr + ' '); do \
			echo "CONVOY_REAL_NET=$$net $(GO) test $(TEST_FLAGS) -v $$pkg"; \
			CONVOY_REAL_NET=$$net $(GO) test $(TEST_FLAGS) -v $$pkg || rc=1; \
		done; exit $$rc) & pids="$$pids $$!"; net=$$((net + 1)); \
	done; rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

.PHONY: real-node-deps
real-node-deps: ## Install what real nodes need from Debian (containerd, runc, CNI plugins, iptables, conntrack) when missing.
	@missing=$$(for p in $(REAL_NODE_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "Real nodes need the Debian packages: $$missing (run as root: apt-get install $$missing)"; exit 1; fi; \
		echo "Installing $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

.PHONY: monitoring-deps
monitoring-deps: ## Install Prometheus and promtool from Debian (package prometheus) when missing.
	@if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then echo "The monitoring tests need Debian's prometheus package (run as root: apt-get install prometheus)"; exit 1; fi; \
		echo "Installing prometheus"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	fi

.PHONY: test-monitoring
test-monitoring: monitoring-deps ## deploy/monitoring's alerts: promtool checks the PrometheusRule's rules and runs their unit tests (deploy/monitoring/tests).
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(GO) run ./test/cmd/promrules -tests deploy/monitoring/tests deploy/monitoring/prometheusrule.yaml > "$$dir/convoy-rules.yaml"; \
	cp deploy/monitoring/tests/*.yaml "$$dir/"; \
	promtool check rules "$$dir/convoy-rules.yaml"; \
	cd "$$dir" && promtool test rules *_test.yaml

.PHONY: test-upgrade
test-upgrade: bin ## The e2e in-place upgrade test from an older release (not part of `test`): make test-upgrade FROM=<git ref>. It builds that ref's operator and scheduler into bin/upgrade-from/.
	@test -n "$(FROM)" || { echo "usage: make test-upgrade FROM=<git ref of the release to upgrade from>"; exit 2; }
	rm -rf bin/upgrade-from && git worktree prune
	git worktree add --detach bin/upgrade-from/src $(FROM)
	cd bin/upgrade-from/src && $(GO) build -o ../convoy-operator ./operator/cmd/convoy-operator && $(GO) build -o ../convoy-scheduler $$(ls -d ./scheduler-plugin/cmd/convoy-scheduler ./scheduler-plugin/cmd/kube-scheduler 2>/dev/null | head -1)
	git worktree remove --force bin/upgrade-from/src
	CONVOY_UPGRADE_FROM=$(CURDIR)/bin/upgrade-from $(GO) test $(TEST_FLAGS) -v -run TestUpgradeInPlace ./test/e2e

.PHONY: test-gpu
test-gpu: bin ## On a machine with an NVIDIA GPU and driver (not part of `test`): the node agent over the real NVML, checked against nvidia-smi, and its read cost.
	CONVOY_TEST_REAL_NVML=1 $(GO) test $(TEST_FLAGS) -v -bench . -benchmem ./test/integration/realgpu

.PHONY: test-stress
test-stress: ## One test target (STRESS_TARGET, default test-integration) beside a bursty CPU load at higher priority (hack/stress.sh): a loaded CI machine's timing, to find races before CI does.
	hack/stress.sh $(or $(STRESS_TARGET),test-integration)

##@ Benchmarks (commands that print figures; see each test/bench/*/README.md)

.PHONY: bench-operator
bench-operator: bin ## 1,000 TrainingJobs × 8 pods: Convoy's operator vs Kubeflow training-operator v1.9.2 vs the API server.
	$(GO) run ./test/bench/operator -jobs 1000

.PHONY: bench-scheduler
bench-scheduler: bin ## Gangs on 1,000 and 5,000 fake nodes, three mixes, at the shipped client QPS: Convoy's scheduler vs kube-scheduler with Coscheduling (and bin packing) vs bare binders (with kube-scheduler's Events and watch).
	$(GO) run ./test/bench/scheduler -nodes 1000,5000

.PHONY: bench-scheduler-dra
bench-scheduler-dra: bin bin-k8s137 ## Gangs claiming GPUs through DRA on 5,000 fake nodes (DRA_NODES), on a 1.37 control plane: Convoy on DRA vs Convoy on nvidia.com/gpu vs upstream kube-scheduler 1.37 with DRA and gang scheduling.
	cd hack/k8s137 && $(GO) build -o $(BIN)/k8s-1.37/ -ldflags "$(K8S_137_LDFLAGS)" k8s.io/kubernetes/cmd/kube-scheduler
	$(GO) run ./test/bench/scheduler -nodes $(DRA_NODES) -mixes fits -schedulers convoy,convoy+dra,kube-scheduler-1.37+dra

.PHONY: bench-trace
bench-trace: ## The Alibaba GPU trace of 2023 (TRACE_DIR) filling its 1,523 nodes: Convoy's planner vs upstream kube-scheduler's default scoring vs first fit.
	$(GO) run ./test/bench/trace -trace $(TRACE_DIR)

.PHONY: bench-forecast
bench-forecast: ## The same trace's GPU tasks with their run times through one ClusterQueue of 48, 56 and 64 GPUs: operator/pkg/forecast's predicted starts against queue position × mean run.
	$(GO) run ./test/bench/trace -trace $(TRACE_DIR) -forecast 48,56,64

.PHONY: bench-elastic
bench-elastic: ## The same trace's GPU tasks as elastic gangs (minWorkers G, numWorkers 2G) through fleets of 64, 96 and 128 GPUs: fixed sizes vs resizing by operator/pkg/elastic.
	$(GO) run ./test/bench/elastic -trace $(TRACE_DIR)

.PHONY: bench-queue
bench-queue: bin ## Admission rate of 1,000 TrainingJobs vs 1,000 batch/v1 Jobs through the same Kueue.
	$(GO) test ./test/bench/queue -run '^$$' -bench BenchmarkAdmission -benchtime 1x -timeout 40m

.PHONY: bench-agent
bench-agent: bin ## The node agent on 1 and 1,000 nodes: compute per poll, time to publish a GPU fault.
	$(GO) test ./scheduler-plugin/pkg/nodeagent -run '^$$' -bench BenchmarkPollCompute
	$(GO) test ./test/integration/nodeagent -run '^$$' -bench BenchmarkAgent -benchtime 10x -timeout 30m

.PHONY: bench-admission
bench-admission: bin ## Quota beyond what fragmented racks can place: time and GPU quota held by jobs admitted but unplaced, jobs/hour, Kueue + convoy-scheduler with and without the placement check.
	$(GO) test ./test/bench/admission -run '^$$' -bench BenchmarkAdmittedUnplaced -benchtime 1x -timeout 60m

.PHONY: bench-progress
bench-progress: bin ## 50 hostile pods flooding the progress endpoint with random and forged tokens: another team's report latency and checkpoint acknowledgements, beside no attack.
	$(GO) test ./test/bench/progress -run '^$$' -bench BenchmarkTenantFlood -benchtime 1x -timeout 20m

.PHONY: chaos
chaos: bin images real-node-deps ## Faults while TrainingJobs run (operator and scheduler SIGKILLed, leader failover, API server restarted, Kueue down, a node NotReady or partitioned, a slow pod webhook; on real nodes (root), a kubelet stopped, a cable cut), counted as a table: test/chaos/README.md.
	$(GO) run ./test/cmd/chaos

##@ Demo

.PHONY: demo
demo: bin build ## Start a local simulated GPU cluster (no Docker) and run the sample TrainingJob on it; with Prometheus (installed when missing and root) scraping it.
	@$(MAKE) --no-print-directory monitoring-deps || echo "The demo runs without Prometheus."
	@hack/demo.sh up

.PHONY: demo-real
demo-real: bin images real-node-deps ## The story on real nodes (root): two kubelets with containerd, Convoy's images, a real PyTorch job trained, killed and resumed.
	$(GO) run ./test/cmd/demoreal --state-dir $(ROOT)/.convoy-real

.PHONY: demo-down
demo-down: ## Stop every process the demo started.
	@hack/demo.sh down

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

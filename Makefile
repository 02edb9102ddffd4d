# mcbake — see README.md.
GO        ?= go
# isal: ISA-L's gzip decoder, when its header is here (libisal-dev); the
# binary opens libisal.so.2 at run time and decodes in Go without it.
# Recursive (=), so that it is read after `deps` has installed it.
TAGS       = containers_image_openpgp exclude_graphdriver_btrfs $(shell test -e /usr/include/isa-l/igzip_lib.h && echo isal)
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
GOFLAGS_B  = -tags "$(TAGS)" -trimpath
export CGO_ENABLED := 1
# jsonv2: encoding/json runs on encoding/json/v2's implementation (an
# experiment in Go 1.26, the default planned for Go 1.27): the same
# results, errors worded otherwise, and a warm build's MachineConfigs read
# in about half the time (docs/design.md, The warm path). The binaries
# and every test are built with it, added to any GOEXPERIMENT of the
# environment; the library's packages are tested without it too
# (nojsonv2, which a go env file cannot undo), as an importer on Go 1.26
# builds them (LIBRARY_PKGS).
comma := ,
export GOEXPERIMENT := $(if $(GOEXPERIMENT),$(GOEXPERIMENT)$(comma))jsonv2
LIBRARY_PKGS := ./machineconfig/... ./manifest/... ./fstree/... ./render/... ./revert/... ./node/...

# Fuzz budgets are execution counts (a few seconds each here), not
# durations: a duration lets a slow input or a minimisation still running
# at the deadline fail the run with "context deadline exceeded".
FUZZTIME  ?= 10000x
FUZZMIN   ?= 200x
FUZZLONG  ?= 2m
DEMO      := _demo

.PHONY: all build node guard-bin deps test unit fuzz fuzz-long demo bench image man clean update-golden vet dist install dist-test

all: build

# build: the CLI, from the tool module (tool/go.mod: containers/image,
# storage and buildah); the library is the module at the root.
build: guard-bin
	$(GO) -C tool build $(GOFLAGS_B) -ldflags "$(LDFLAGS)" -o ../bin/mcbake ./cmd/mcbake

# node: the static node binary (no cgo, no build tags), for every RHCOS.
node:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/mcbake-node ./cmd/mcbake-node

# guard-bin: the node binary for each of GUARD_ARCHES (GOARCH names;
# default: this machine's), embedded in mcbake as the revert guard's
# (tool/guard): every image mcbake build makes carries the one of its
# architecture. Each adds about 12 MB to mcbake, and 5 MB more for its
# deflate encoding (tool/guard/gendeflate), which a gzip layer splices in
# instead of compressing the binary on every build with an empty cache.
HOST_ARCH   := $(shell $(GO) env GOARCH)
GUARD_ARCHES ?= $(HOST_ARCH)
guard-bin: node
	rm -f tool/guard/bin/mcbake-node tool/guard/bin/mcbake-node-linux-*
	for a in $(GUARD_ARCHES); do \
	  if [ $$a = $(HOST_ARCH) ]; then cp bin/mcbake-node tool/guard/bin/mcbake-node-linux-$$a; \
	  else CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o tool/guard/bin/mcbake-node-linux-$$a ./cmd/mcbake-node || exit 1; fi; \
	done
	$(GO) -C tool run ./guard/gendeflate $(foreach a,$(GUARD_ARCHES),guard/bin/mcbake-node-linux-$(a))

vet:
	$(GO) vet -tags "$(TAGS)" ./...
	$(GO) -C tool vet -tags "$(TAGS)" ./...

# deps: the Debian packages the tests use, when missing (as root).
deps:
	./hack/test-deps.sh

# test: everything CI runs. Installs ostree/skopeo/umoci/buildah/crun when
# missing (as root), runs every test, then each fuzz target briefly. vet
# runs after deps, even under -j: TAGS depends on what deps installs.
test: deps guard-bin
	$(MAKE) --no-print-directory vet
	$(GO) test -tags "$(TAGS)" -count=1 -timeout 20m ./...
	GOEXPERIMENT=nojsonv2 $(GO) test -tags "$(TAGS)" -count=1 -timeout 20m $(LIBRARY_PKGS)
	$(GO) -C tool test -tags "$(TAGS)" -count=1 -timeout 20m ./...
	cd examples/tekton && GOEXPERIMENT=nojsonv2 $(GO) test -count=1 ./...
	cd examples/library && GOEXPERIMENT=nojsonv2 CGO_ENABLED=0 $(GO) vet ./... && GOEXPERIMENT=nojsonv2 CGO_ENABLED=0 $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory dist-test
	$(MAKE) --no-print-directory fuzz

fuzz:
	TAGS="$(TAGS)" FUZZTIME=$(FUZZTIME) FUZZMIN=$(FUZZMIN) ./hack/fuzz.sh

# fuzz-long: every fuzz target for minutes each.
fuzz-long:
	TAGS="$(TAGS)" FUZZTIME=$(FUZZLONG) FUZZMIN=30s ./hack/fuzz.sh

# Regenerate golden files: every package whose tests define -update.
update-golden:
	for d in $$(grep -l 'flag.Bool("update"' $$(git ls-files '*_test.go') | xargs -n1 dirname | sort -u); do \
	  case $$d in tool/*) m=tool p=./$${d#tool/} ;; *) m=. p=./$$d ;; esac; \
	  $(GO) -C $$m test -tags "$(TAGS)" -count=1 $$p -update || exit 1; \
	done

demo: build
	./hack/demo.sh

bench: build
	./hack/bench.sh

# image: mcbake's container image from the Containerfile, with buildah
# (hack/image.sh: IMAGE, BUILDER_IMAGE, RUNTIME_IMAGE, GOMODCACHE_DIR for an
# offline build; docs/install.md).
image:
	VERSION=$(VERSION) ./hack/image.sh

# dist: release tarballs and their checksums in DISTDIR, for each of
# DIST_ARCHES (hack/dist.sh; docs/install.md).
DISTDIR     ?= dist
DIST_ARCHES ?= amd64 arm64
dist:
	GO="$(GO)" VERSION=$(VERSION) TAGS="$(TAGS)" LDFLAGS="$(LDFLAGS)" DISTDIR=$(DISTDIR) DIST_ARCHES="$(DIST_ARCHES)" ./hack/dist.sh

# install: the binaries, man pages and shell completions under
# $(DESTDIR)$(PREFIX), where each is looked for.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0755 bin/mcbake bin/mcbake-node $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	./bin/mcbake completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/mcbake
	./bin/mcbake completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_mcbake
	./bin/mcbake completion fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/mcbake.fish

# dist-test: make dist and make install into temporary directories, and
# check what they hold (hack/dist-test.sh).
dist-test:
	GO="$(GO)" VERSION=$(VERSION) ./hack/dist-test.sh

# man: one page per command in man/ (mcbake.1, mcbake-build.1, ...), from
# the same text as --help; dated SOURCE_DATE_EPOCH (default: the last
# commit's time).
man: build
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} ./bin/mcbake man man

clean:
	rm -rf bin man dist $(DEMO) _bench

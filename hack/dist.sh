#!/usr/bin/env bash
# make dist: release tarballs in DISTDIR (default dist), one per
# architecture of DIST_ARCHES (GOARCH names, default "amd64 arm64"):
#   mcbake-VERSION-linux-ARCH.tar.gz, holding mcbake-VERSION-linux-ARCH/
#     bin/mcbake bin/mcbake-node
#     share/man/man1/mcbake*.1
#     share/bash-completion/completions/mcbake
#     share/zsh/site-functions/_mcbake
#     share/fish/vendor_completions.d/mcbake.fish
#     README.md LICENSE (when there is one)
#   mcbake-VERSION-SHA256SUMS, sha256sum's format.
# The layout is a PREFIX's: tar -C /usr/local --strip-components=1 -xzf ...
# mcbake uses cgo: another architecture than this machine's needs its
# cross C compiler (CC_ARCH, e.g. CC_arm64=aarch64-linux-gnu-gcc, the
# default; apt-get install gcc-aarch64-linux-gnu). Every mcbake carries the
# revert guard of each architecture of DIST_ARCHES (docs/node.md), so it
# builds images for any of them. Tarballs are reproducible: files dated
# SOURCE_DATE_EPOCH (default: the last commit's), owned by root, sorted.
# Environment from the Makefile: GO, VERSION, TAGS, LDFLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
version=${VERSION:?VERSION is unset (make dist sets it)}
distdir=${DISTDIR:-dist}
arches=${DIST_ARCHES:-amd64 arm64}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
host=$($go env GOARCH)
: "${CC_arm64:=aarch64-linux-gnu-gcc}" "${CC_ppc64le:=powerpc64le-linux-gnu-gcc}" "${CC_s390x:=s390x-linux-gnu-gcc}"

# Check every cross compiler before building anything.
for a in $arches; do
  if [ "$a" != "$host" ]; then
    cc_var=CC_$a
    cc=${!cc_var:-}
    if [ -z "$cc" ] || ! command -v "$cc" >/dev/null; then
      echo "make dist: no C compiler for linux/$a (set $cc_var, or apt-get install gcc-$( [ "$a" = arm64 ] && echo aarch64 || echo "$a")-linux-gnu; or DIST_ARCHES=$host)" >&2
      exit 2
    fi
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$distdir"

# The revert guard of every architecture, embedded in each mcbake.
make --no-print-directory guard-bin GUARD_ARCHES="$arches" VERSION="$version" >/dev/null

# Man pages and completions do not depend on the architecture: written
# once, by this machine's mcbake.
$go -C tool build -tags "$TAGS" -trimpath -ldflags "$LDFLAGS" -o "$work/mcbake-host" ./cmd/mcbake
mkdir -p "$work/share/man/man1" "$work/share/bash-completion/completions" \
  "$work/share/zsh/site-functions" "$work/share/fish/vendor_completions.d"
SOURCE_DATE_EPOCH=$epoch "$work/mcbake-host" man "$work/share/man/man1" >/dev/null
"$work/mcbake-host" completion bash > "$work/share/bash-completion/completions/mcbake"
"$work/mcbake-host" completion zsh > "$work/share/zsh/site-functions/_mcbake"
"$work/mcbake-host" completion fish > "$work/share/fish/vendor_completions.d/mcbake.fish"

names=()
for a in $arches; do
  name=mcbake-$version-linux-$a
  root=$work/$name
  mkdir -p "$root/bin"
  cp -r "$work/share" "$root/"
  cp README.md "$root/"
  if [ -e LICENSE ]; then cp LICENSE "$root/"; fi
  tags=$TAGS cc=
  if [ "$a" != "$host" ]; then
    cc_var=CC_$a
    cc=${!cc_var}
    # ISA-L's decoder is x86-64 code (internal/decompress): other
    # architectures decode gzip in Go.
    tags=$(echo "$TAGS" | sed 's/\bisal\b//')
  fi
  CGO_ENABLED=0 GOOS=linux GOARCH=$a $go build -trimpath -ldflags "$LDFLAGS" -o "$root/bin/mcbake-node" ./cmd/mcbake-node
  env CGO_ENABLED=1 GOOS=linux GOARCH=$a ${cc:+CC=$cc} $go -C tool build -tags "$tags" -trimpath -ldflags "$LDFLAGS" \
    -o "$root/bin/mcbake" ./cmd/mcbake
  find "$root" -exec touch -h -d "@$epoch" {} +
  tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$name" |
    gzip -n -9 > "$work/$name.tar.gz"
  mv "$work/$name.tar.gz" "$distdir/"
  names+=("$name.tar.gz")
  echo "make dist: $distdir/$name.tar.gz" >&2
done
(cd "$distdir" && sha256sum "${names[@]}") > "$work/SHA256SUMS"
mv "$work/SHA256SUMS" "$distdir/mcbake-$version-SHA256SUMS"
echo "make dist: $distdir/mcbake-$version-SHA256SUMS" >&2
# The tree's own guard again (make build embeds this machine's only).
make --no-print-directory guard-bin VERSION="$version" >/dev/null

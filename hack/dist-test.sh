#!/usr/bin/env bash
# make dist-test: runs make dist and make install into temporary
# directories and checks what they hold: each tarball's files, owners and
# binaries' architecture, the checksums, that the binaries of this machine
# run and print the version, and that install puts everything where
# PREFIX's tools look. Architectures: this machine's, and arm64 when
# aarch64-linux-gnu-gcc is here (else the test says it skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
host=$($go env GOARCH)
arches=$host
if [ "$host" != arm64 ]; then
  if command -v aarch64-linux-gnu-gcc >/dev/null; then arches="$arches arm64"
  else echo "dist-test: no aarch64-linux-gnu-gcc: linux/arm64 not checked (apt-get install gcc-aarch64-linux-gnu)" >&2; fi
fi
version=v0.0.0-disttest
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dist-test: $*" >&2; exit 1; }

make --no-print-directory dist VERSION=$version DISTDIR="$tmp/dist" DIST_ARCHES="$arches" >/dev/null
sums=$tmp/dist/mcbake-$version-SHA256SUMS
(cd "$tmp/dist" && sha256sum --check --strict --quiet "$(basename "$sums")") || fail "checksums do not match"
# The sums name every tarball, and nothing else.
want=$(for a in $arches; do echo "mcbake-$version-linux-$a.tar.gz"; done | sort)
got=$(awk '{print $2}' "$sums" | sort)
[ "$want" = "$got" ] || fail "$sums names $got, want $want"
[ "$(ls "$tmp/dist" | grep -c '\.tar\.gz$')" = "$(echo "$want" | wc -l)" ] || fail "dist holds other tarballs than the sums name"

for a in $arches; do
  name=mcbake-$version-linux-$a
  tarball=$tmp/dist/$name.tar.gz
  tar -tvzf "$tarball" | awk '$2 != "0/0" {bad = 1; print "not root-owned: " $0} END {exit bad}' >&2 || fail "$tarball: files not owned by root"
  tar -tzf "$tarball" | grep -v "^$name/" && fail "$tarball: files outside $name/"
  mkdir -p "$tmp/x"
  tar -C "$tmp/x" -xzf "$tarball"
  r=$tmp/x/$name
  for f in bin/mcbake bin/mcbake-node share/man/man1/mcbake.1 share/man/man1/mcbake-build.1 share/man/man1/mcbake-verify.1 \
    share/bash-completion/completions/mcbake share/zsh/site-functions/_mcbake share/fish/vendor_completions.d/mcbake.fish README.md; do
    [ -s "$r/$f" ] || fail "$tarball lacks $f"
  done
  case $a in amd64) machine='X86-64' ;; arm64) machine='AArch64' ;; *) machine=$a ;; esac
  for b in mcbake mcbake-node; do
    readelf -h "$r/bin/$b" | grep -q "Machine:.*$machine" || fail "$tarball: bin/$b is not a linux/$a binary: $(readelf -h "$r/bin/$b" | grep Machine)"
  done
  # The node binary is static (it runs on every RHCOS); mcbake uses cgo.
  readelf -l "$r/bin/mcbake-node" | grep -q INTERP && fail "$tarball: bin/mcbake-node is not static"
  if [ "$a" = "$host" ]; then
    [ "$("$r/bin/mcbake" --version)" = "mcbake $version" ] || fail "$tarball: mcbake --version = $("$r/bin/mcbake" --version)"
    [ "$("$r/bin/mcbake-node" version)" = "mcbake-node $version" ] || fail "$tarball: mcbake-node version = $("$r/bin/mcbake-node" version)"
  fi
  bash -n "$r/share/bash-completion/completions/mcbake" || fail "$tarball: the bash completion does not parse"
  head -1 "$r/share/zsh/site-functions/_mcbake" | grep -q '^#compdef mcbake' || fail "$tarball: _mcbake is not a zsh completion"
  grep -q '^complete -c mcbake' "$r/share/fish/vendor_completions.d/mcbake.fish" || fail "$tarball: mcbake.fish is not a fish completion"
  grep -qi '^\.TH "\?MCBAKE' "$r/share/man/man1/mcbake-build.1" || fail "$tarball: mcbake-build.1 is not a man page"
  # Every mcbake carries the revert guard of every architecture.
  for g in $arches; do
    "$r/bin/mcbake" version >/dev/null 2>&1 || continue
    "$r/bin/mcbake" guard-tree --arch "$g" -o "$tmp/guard-$a-$g" >/dev/null 2>&1 ||
      fail "$tarball: mcbake has no revert guard for linux/$g"
  done
  echo "dist-test: $name.tar.gz: ok" >&2
done

# make install: the same files under DESTDIR/PREFIX.
dest=$tmp/dest
make --no-print-directory install VERSION=$version PREFIX=/usr/local DESTDIR="$dest" >/dev/null
p=$dest/usr/local
for f in bin/mcbake bin/mcbake-node share/man/man1/mcbake.1 share/man/man1/mcbake-build.1 \
  share/bash-completion/completions/mcbake share/zsh/site-functions/_mcbake share/fish/vendor_completions.d/mcbake.fish; do
  [ -s "$p/$f" ] || fail "make install DESTDIR=$dest PREFIX=/usr/local: no $f"
done
[ -x "$p/bin/mcbake" ] && [ -x "$p/bin/mcbake-node" ] || fail "make install: binaries not executable"
[ "$("$p/bin/mcbake" --version)" = "mcbake $version" ] || fail "installed mcbake --version = $("$p/bin/mcbake" --version)"
# Only under DESTDIR/PREFIX.
[ -z "$(cd "$dest" && find . -mindepth 1 -maxdepth 1 ! -name usr)" ] || fail "make install wrote outside PREFIX: $(ls "$dest")"
diff <(cd "$tmp/x/mcbake-$version-linux-$host/share" && find . -type f | sort) <(cd "$p/share" && find . -type f | sort) ||
  fail "make install's share/ differs from the tarball's"
echo "dist-test: make install: ok" >&2

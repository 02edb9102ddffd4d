#!/usr/bin/env bash
# make image: mcbake's own container image, built offline with buildah from
# scratch (no registry, no base image to pull). It holds:
#   /usr/bin/mcbake        the main binary (cgo: with the glibc files it links,
#                          and libisal.so.2 when it decodes gzip with ISA-L)
#   /usr/bin/mcbake-node   the static node binary (make node): a link to the
#                          revert guard's copy below
#   /usr/share/mcbake/guard   the revert guard's files as a tree (mcbake
#                          guard-tree), for COPY --from=THIS_IMAGE
#                          /usr/share/mcbake/guard/ / in a Containerfile
#   /bin/sh and the usual tools: busybox-static
#   /etc/ssl/certs/ca-certificates.crt   the build host's CA certificates
#   /etc/containers/policy.json          a default signature policy (accept
#                                        anything; mount your own for bases)
#   /etc/containers/registries.d/default.yaml   sigstore attachments on
#   /etc/passwd, /etc/group, /tmp, /var/tmp, /var/cache/mcbake
# Needs buildah (root, or inside `buildah unshare`), busybox-static and
# ca-certificates. Environment: IMAGE (default localhost/mcbake:latest), BIN
# (directory with mcbake and mcbake-node, default bin), SOURCE_DATE_EPOCH
# (creation time, default the last commit's), CONTAINERS_STORAGE_CONF (which
# store buildah uses).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${IMAGE:-localhost/mcbake:latest}
bin=${BIN:-bin}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
for f in "$bin/mcbake" "$bin/mcbake-node" /bin/busybox /etc/ssl/certs/ca-certificates.crt; do
  [ -e "$f" ] || { echo "make image: $f is missing (make build node; apt-get install busybox-static ca-certificates)" >&2; exit 1; }
done
if ldd /bin/busybox >/dev/null 2>&1; then
  echo "make image: /bin/busybox is not a static busybox (apt-get install busybox-static)" >&2
  exit 1
fi

root=$(mktemp -d)
ctr=
cleanup() {
  if [ -n "$ctr" ]; then buildah rm "$ctr" >/dev/null; fi
  rm -rf "$root"
}
trap cleanup EXIT

# The tree, laid out here and copied in as one layer.
mkdir -p "$root"/{bin,usr/bin,etc/ssl/certs,etc/containers/registries.d,tmp,var/tmp,var/cache/mcbake,root,workspace}
chmod 1777 "$root/tmp" "$root/var/tmp"
install -m 0755 "$bin/mcbake" "$root/usr/bin/"
mkdir -p "$root/usr/share/mcbake"
"$bin/mcbake" guard-tree --guard-binary "$bin/mcbake-node" -o "$root/usr/share/mcbake/guard" >/dev/null
ln -s ../share/mcbake/guard/usr/libexec/mcbake/mcbake-node "$root/usr/bin/mcbake-node"
install -m 0755 /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
# mcbake links glibc (cgo): its loader and libraries, at the paths it asks for.
ldd "$bin/mcbake" | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
# ISA-L's gzip decoder is opened at run time, not linked: ldd does not list
# it. The image has it when the binary uses it here.
# (No reader of a pipe here stops early: with pipefail, a writer killed
# by SIGPIPE fails the script.)
if [ "$("$bin/mcbake" version | sed -n 's/^gzip decoder: //p')" = isa-l ]; then
  lib=$(ldconfig -p | awk '$1 == "libisal.so.2" && /x86-64/ && !found {print $NF; found = 1}')
  if [ -n "$lib" ]; then
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  fi
fi
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
cat > "$root/etc/containers/policy.json" <<'EOF'
{
  "default": [{"type": "insecureAcceptAnything"}],
  "transports": {"docker-daemon": {"": [{"type": "insecureAcceptAnything"}]}}
}
EOF
cat > "$root/etc/containers/registries.d/default.yaml" <<'EOF'
# Sigstore signatures live in the registry, next to the image.
default-docker:
  use-sigstore-attachments: true
EOF
find "$root" -exec touch -h -d "@$epoch" {} +

ctr=$(buildah from scratch)
buildah copy --quiet "$ctr" "$root/" / >/dev/null
buildah config \
  --env PATH=/usr/bin:/bin --env HOME=/root --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --entrypoint '["/usr/bin/mcbake"]' --cmd '["--help"]' --workingdir /workspace \
  --label org.opencontainers.image.title=mcbake \
  --label "org.opencontainers.image.version=$version" \
  --label org.opencontainers.image.description="Bake MachineConfigs into layered OS images offline" \
  "$ctr"
buildah commit --quiet --timestamp "$epoch" --rm "$ctr" "$tag"
ctr=
echo "make image: $tag" >&2

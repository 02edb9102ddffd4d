#!/usr/bin/env bash
# make image: mcbake's container image from the Containerfile at the root,
# with buildah (docs/install.md). Environment:
#   IMAGE           the tag (default localhost/mcbake:latest)
#   VERSION         what `mcbake version` prints (default: git describe)
#   BUILDER_IMAGE   the Containerfile's build arguments; unset: its
#   RUNTIME_IMAGE   defaults (pulled from docker.io)
#   GOMODCACHE_DIR  a Go module cache to mount into the build instead of
#                   downloading (GOPROXY=off: the build is offline)
#   GOCACHE_DIR     a Go build cache to mount into the build (faster
#                   rebuilds)
#   SOURCE_DATE_EPOCH   the image's creation time (default: the last
#                   commit's)
#   BUILDAH_ISOLATION, CONTAINERS_STORAGE_CONF: as buildah reads them.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${IMAGE:-localhost/mcbake:latest}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
command -v buildah >/dev/null || { echo "make image: buildah is not installed (apt-get install buildah)" >&2; exit 1; }

args=(build --file Containerfile --tag "$tag" --timestamp "$epoch" --build-arg "VERSION=$version")
for a in BUILDER_IMAGE RUNTIME_IMAGE GUARD_ARCHES; do
  if [ -n "${!a:-}" ]; then args+=(--build-arg "$a=${!a}"); fi
done
if [ -n "${GOMODCACHE_DIR:-}" ]; then
  args+=(--volume "$GOMODCACHE_DIR:/go/pkg/mod:ro" --build-arg GOPROXY=off)
fi
if [ -n "${GOCACHE_DIR:-}" ]; then
  args+=(--volume "$GOCACHE_DIR:/root/.cache/go-build")
fi
buildah "${args[@]}" .
echo "make image: $tag" >&2

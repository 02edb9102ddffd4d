#!/usr/bin/env bash
# make image: build mcbake's own container image from the Containerfile with
# buildah, or podman when buildah is absent. Needs access to the registries
# named in the Containerfile's FROM lines.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${IMAGE:-localhost/mcbake:latest}
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
if command -v buildah >/dev/null; then
  exec buildah build --layers -f Containerfile --build-arg "VERSION=$version" -t "$tag" .
elif command -v podman >/dev/null; then
  exec podman build -f Containerfile --build-arg "VERSION=$version" -t "$tag" .
fi
echo "make image: neither buildah nor podman is installed" >&2
exit 1

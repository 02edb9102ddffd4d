#!/usr/bin/env bash
# Installs the Debian packages the tests use (real ostree, skopeo, umoci,
# buildah, crun; systemd's systemctl for render's systemd differential tests;
# qemu, mmdebstrap and e2fsprogs for internal/ostreevm) when
# they are missing. Needs root for apt-get; otherwise it
# only says what is missing, and the tests that need them skip.
set -euo pipefail
need=()
for pair in ostree:ostree skopeo:skopeo umoci:umoci buildah:buildah crun:crun systemctl:systemd \
    qemu-system-x86_64:qemu-system-x86 mmdebstrap:mmdebstrap debugfs:e2fsprogs; do
  cmd=${pair%%:*} pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: missing ${need[*]} (not root: not installing; tests that need them skip)" >&2
  exit 0
fi
echo "test-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

#!/usr/bin/env bash
# Installs the Debian packages the tests use (real ostree, skopeo, umoci,
# buildah, crun; systemd's systemctl for render's systemd differential tests;
# docker-registry for the registry tests; ca-certificates; mmdebstrap for
# the container image test's offline base images (tool/e2e/containerimage)
# and, with qemu and e2fsprogs, for internal/testing/ostreevm; the aarch64
# cross compiler and C library headers for make dist's arm64 mcbake (the
# headers are only a recommendation of the compiler, which --no-install-
# recommends leaves out); libblkid's headers for
# building ignition in internal/testing/ignitiontest; ISA-L's, for the
# isal build tag's gzip decoder)
# when they are missing. Needs root for apt-get;
# otherwise it only says what is missing, and the tests that need them skip.
set -euo pipefail
need=()
for pair in ostree:ostree skopeo:skopeo umoci:umoci buildah:buildah crun:crun systemctl:systemd \
    docker-registry:docker-registry /etc/ssl/certs/ca-certificates.crt:ca-certificates \
    aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross \
    /usr/include/blkid/blkid.h:libblkid-dev /usr/include/isa-l/igzip_lib.h:libisal-dev \
    qemu-system-x86_64:qemu-system-x86 mmdebstrap:mmdebstrap debugfs:e2fsprogs; do
  cmd=${pair%%:*} pkg=${pair##*:}
  if [[ $cmd == /* ]]; then [ -e "$cmd" ] || need+=("$pkg"); continue; fi
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
# docker-registry's package starts a registry on every interface (:5000):
# the tests start their own on 127.0.0.1, so no service may start here.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

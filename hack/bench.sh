#!/usr/bin/env bash
# make bench: mcbake against its anchors, in one run, on a generated
# RHCOS-like base (default 1 GiB / 50k files / 8 layers; override with
# BENCH_SIZE, BENCH_FILES, BENCH_LAYERS). Prints absolute times and the
# ratios the targets are stated in:
#   cold build   <= 1.3x the time to merely decompress the base layers
#   warm build   <= 100 ms (cached index)
#   buildah CLI (from/copy/commit) >= 20x slower than mcbake (printed
#   against both the cold and the warm build)
#   cold diff    <= 1.3x decompression; warm diff <= 100 ms; peak RSS <= 200 MB
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS="containers_image_openpgp exclude_graphdriver_btrfs"
SIZE=${BENCH_SIZE:-1GiB} FILES=${BENCH_FILES:-50000} LAYERS=${BENCH_LAYERS:-8}
RUNS=${BENCH_RUNS:-5}
B=_bench
policy=hack/demo-policy.json
mc=testdata/machineconfigs/rendered-worker-aws.json
mcbake=./bin/mcbake
mkdir -p "$B"

stamp="$SIZE-$FILES-$LAYERS"
if [ "$(cat "$B/base.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "generating the $SIZE / $FILES files / $LAYERS layers base (once)..." >&2
  rm -rf "$B/base"
  go run -tags "$TAGS" ./internal/testbase/mkbase -o "$B/base" -size "$SIZE" -files "$FILES" -layers "$LAYERS" >/dev/null
  echo "$stamp" >"$B/base.stamp"
fi
base="oci:$B/base:latest"

# seconds (float) and peak RSS (KiB) of a command: "secs kib"
measure() { /usr/bin/time -f '%e %M' -o "$B/time.out" "$@" >/dev/null 2>"$B/cmd.err" || { cat "$B/cmd.err" >&2; exit 1; }; cat "$B/time.out"; }
# the median of RUNS runs of a command, seconds
median() {
  local ts=()
  for _ in $(seq "$RUNS"); do ts+=("$(measure "$@" | cut -d' ' -f1)"); done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) b = 0.001; printf "%.2f", a / b }'; }

# The decompression floor: every layer blob of the base through gzip -dc
# (zstd -dc for zstd layers), one after another.
layers=$(python3 - "$B/base" <<'PY'
import json, sys
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
m = json.load(open(f"{d}/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
for l in m["layers"]:
    print(("zstd" if "zstd" in l["mediaType"] else "gzip"), f"{d}/blobs/sha256/" + l["digest"].split(":")[1])
PY
)
decomp() { while read -r algo blob; do "$algo" -dc <"$blob" >/dev/null; done <<<"$layers"; }
export -f decomp; export layers
t_gzip=$(median bash -c decomp)

build() { $mcbake build --quiet --base "$base" -f "$mc" -o "oci:$B/out-$1:latest" --signature-policy "$policy" --cache-dir "$2"; }
cold_build() { rm -rf "$B/cache-cold"; build cold "$B/cache-cold"; }
export -f build cold_build; export mcbake base mc policy B
t_cold=$(median bash -c cold_build)
build warm "$B/cache-warm" >/dev/null
t_warm=$(median bash -c 'build warm "$B/cache-warm"')

diff_cmd() { $mcbake diff --quiet --format json --base "$base" --image "oci:$B/out-warm:latest" --signature-policy "$policy" --cache-dir "$1"; }
cold_diff() { rm -rf "$B/cache-diff"; diff_cmd "$B/cache-diff"; }
export -f diff_cmd cold_diff
t_cold_diff=$(median bash -c cold_diff)
rss_cold_diff=$(rm -rf "$B/cache-diff"; measure $mcbake diff --quiet --format json --base "$base" --image "oci:$B/out-warm:latest" --signature-policy "$policy" --cache-dir "$B/cache-diff" | cut -d' ' -f2)
t_warm_diff=$(median bash -c 'diff_cmd "$B/cache-warm"')
rss_cold_build=$(rm -rf "$B/cache-cold"; measure $mcbake build --quiet --base "$base" -f "$mc" -o "oci:$B/out-cold:latest" --signature-policy "$policy" --cache-dir "$B/cache-cold" | cut -d' ' -f2)

# buildah CLI: from / copy / commit of the same rendered files, fresh store.
t_buildah=skipped
if command -v buildah >/dev/null && [ "$(id -u)" = 0 ]; then
  $mcbake render -f "$mc" -o "$B/rendered" >/dev/null
  # Debian's buildah 1.28 derives a container name from the path, and a
  # path component starting with "_" is not a valid name: go through a link.
  # (and it must be lowercase: no mktemp names)
  link=/tmp/mcbakebench.$$ && ln -sfn "$PWD/$B" "$link" && trap 'rm -f "$link"' EXIT
  export link
  buildah_run() {
    local st="$B/buildah-store"
    rm -rf "$st" "$B/out-buildah"
    local g=(--root "$st/root" --runroot "$st/run" --storage-driver overlay)
    local c
    c=$(buildah "${g[@]}" from --quiet --signature-policy "$policy" "oci:$link/base:latest")
    buildah "${g[@]}" copy "$c" "$B/rendered/rootfs" / >/dev/null
    buildah "${g[@]}" commit --quiet --signature-policy "$policy" "$c" "oci:$link/out-buildah:latest" >/dev/null
    buildah "${g[@]}" rm -a >/dev/null
    buildah "${g[@]}" rmi -a -f >/dev/null 2>&1 || true
  }
  export -f buildah_run
  t_buildah=$(RUNS=1 median bash -c buildah_run)
fi

cat <<EOF2
mcbake bench: base $SIZE / $FILES files / $LAYERS layers, median of $RUNS runs ($(nproc) cores)

  decompress base layers (gzip -dc) ${t_gzip}s      [anchor]
  mcbake build, cold cache          ${t_cold}s      $(ratio "$t_cold" "$t_gzip")x decompression   (target <= 1.3x)   peak RSS $((rss_cold_build / 1024)) MB
  mcbake build, warm cache          ${t_warm}s      $(awk -v t="$t_warm" 'BEGIN{printf "%.0f", t*1000}') ms              (target <= 100 ms)
  buildah CLI from/copy/commit      ${t_buildah}s     $( [ "$t_buildah" = skipped ] && echo "(not root or no buildah)" || echo "$(ratio "$t_buildah" "$t_cold")x a cold mcbake build, $(ratio "$t_buildah" "$t_warm")x a warm one (target >= 20x)")
  mcbake diff, cold cache           ${t_cold_diff}s      $(ratio "$t_cold_diff" "$t_gzip")x decompression   (target <= 1.3x)   peak RSS $((rss_cold_diff / 1024)) MB (target <= 200 MB)
  mcbake diff, warm cache           ${t_warm_diff}s      $(awk -v t="$t_warm_diff" 'BEGIN{printf "%.0f", t*1000}') ms              (target <= 100 ms)
EOF2

#!/usr/bin/env bash
# make bench: mcbake against its anchors, in one run, printing absolute
# times and the ratios the targets are stated in (medians of BENCH_RUNS;
# of BENCH_WARM_RUNS, timed to the microsecond, for the warm ones).
#
# 1. A generated RHCOS-like base (default 1 GiB / 50k files / 8 layers;
#    BENCH_SIZE, BENCH_FILES, BENCH_LAYERS; BENCH_PLAIN=0 skips it):
#      cold build   <= 1.3x the time to merely decompress the base layers
#      warm build   <= 100 ms (cached index)
#      buildah CLI (from/copy/commit) >= 20x slower than mcbake
#      cold diff    <= 1.3x decompression; warm diff <= 100 ms; peak RSS <= 200 MB
# 2. An ostree-shaped base, as rpm-ostree publishes them: every file an
#    object under sysroot/ostree/repo/objects plus a hard link at its path,
#    48 layers (BENCH_OSTREE_SIZE, BENCH_OSTREE_FILES, BENCH_OSTREE_LAYERS),
#    in three forms: gzip OCI, containers-storage (overlay, needs root) and
#    zstd:chunked OCI; cold and warm build and diff for each, and buildah:
#      gzip cold build                          <= 0.6x decompression
#      containers-storage, zstd:chunked cold    <= 0.1x decompression (of the gzip form)
#      warm build <= 30 ms, warm diff <= 15 ms
#    and `mcbake version`, the floor of every run (package initialisation)
# 3. Peak memory: the same ostree shape with 500k entries (250k files,
#    BENCH_MEM_FILES; 256 MiB) in the three forms, a cold build each:
#      peak RSS <= 200 MB (BENCH_MEM=0 skips it)
# 4. mcbake-node prepare-revert (node.Prepare, BenchmarkPrepare in
#    node/bench_test.go) on real-ostree deployments with 2,000 and 100,000
#    owned files under /etc: the first run (writes them all) and the next
#    (writes nothing), time and peak RSS of each. It runs at shutdown,
#    where a node waits a minute or two. Needs root and ostree
#    (BENCH_NODE=0 skips it).
# 5. Valid MachineConfigs at the 64 MiB input limit (60 MB: one file, or
#    20,000): render and verify, time and peak RSS (BENCH_LIMITS=0 skips
#    it).
# 6. A cold CI runner against a registry (Debian's docker-registry on
#    127.0.0.1, plain HTTP, its access log counting what was downloaded):
#    the RHCOS-like generator's base (BENCH_REG_SIZE, BENCH_REG_FILES:
#    section 1's, 1 GiB / 50k files / 8 layers, by default; an RHCOS
#    release is 1.2 GB of gzip), gzip and zstd:chunked; a cold
#    build and a cold verify, scanning, with the published base index
#    (mcbake index push first), and from the zstd:chunked form, against
#    skopeo copy of the base (the floor of any tool that pulls it); and a
#    cold build of section 2's 48-layer ostree-shaped base, scanning and
#    with its published index:
#      published index: <= 1% of the base's bytes, <= 0.1x the scanning time
#      zstd:chunked:    <= 3% of the base's bytes
#    (median of BENCH_REG_RUNS runs, 3; BENCH_REGISTRY=0 skips it; needs
#    docker-registry and skopeo).
# BENCH_BUILDAH=0 skips buildah. The bases are generated once, under
# BENCH_DIR (default _bench).
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS="containers_image_openpgp exclude_graphdriver_btrfs"
SIZE=${BENCH_SIZE:-1GiB} FILES=${BENCH_FILES:-50000} LAYERS=${BENCH_LAYERS:-8}
OSIZE=${BENCH_OSTREE_SIZE:-$SIZE} OFILES=${BENCH_OSTREE_FILES:-$FILES} OLAYERS=${BENCH_OSTREE_LAYERS:-48}
RUNS=${BENCH_RUNS:-5}
B=${BENCH_DIR:-_bench}
mkdir -p "$B"
Babs=$(cd "$B" && pwd)
policy=hack/demo-policy.json
mc=testdata/machineconfigs/rendered-worker-aws.json
mcbake=./bin/mcbake
root=false
[ "$(id -u)" = 0 ] && root=true
buildah=false
[ "${BENCH_BUILDAH:-1}" = 1 ] && command -v buildah >/dev/null && $root && buildah=true
# The store of the containers-storage form, as mcbake and buildah name it.
store=(--storage-root "$Babs/store/root" --storage-runroot "$Babs/store/run" --storage-driver overlay)
bstore=(--root "$Babs/store/root" --runroot "$Babs/store/run" --storage-driver overlay)

# seconds (float) and peak RSS (KiB) of a command: "secs kib"
measure() { /usr/bin/time -f '%e %M' -o "$B/time.out" "$@" >/dev/null 2>"$B/cmd.err" || { cat "$B/cmd.err" >&2; exit 1; }; cat "$B/time.out"; }
# the median of RUNS runs of a command, seconds
median() {
  local ts=()
  for _ in $(seq "$RUNS"); do ts+=("$(measure "$@" | cut -d' ' -f1)"); done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
# the median of WARM_RUNS runs of a quick command, seconds, timed to the
# microsecond (time(1) counts in 10 ms steps)
WARM_RUNS=${BENCH_WARM_RUNS:-21}
median_fine() {
  local ts=() s e
  for _ in $(seq "$WARM_RUNS"); do
    s=${EPOCHREALTIME/[.,]/} # microseconds, whatever the locale's decimal point
    "$@" >/dev/null 2>"$B/cmd.err" || { cat "$B/cmd.err" >&2; exit 1; }
    e=${EPOCHREALTIME/[.,]/}
    ts+=("$(awk -v us=$((e - s)) 'BEGIN { printf "%.6f", us / 1e6 }')")
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) b = 0.001; printf "%.2f", a / b }'; }
ms() { awk -v t="$1" 'BEGIN{printf "%.0f", t*1000}'; }
mb() { echo $(($1 / 1024)); }

# decompress_cmd prints a command decompressing every layer blob of the
# OCI layout $1 one after another (gzip -dc, zstd -dc for zstd layers):
# the floor of any tool that reads the layers.
decompress_cmd() {
  python3 - "$1" <<'PY'
import json, shlex, sys
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
m = json.load(open(f"{d}/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
print("; ".join(("zstd" if "zstd" in l["mediaType"] else "gzip") + " -dc < " + shlex.quote(f"{d}/blobs/sha256/" + l["digest"].split(":")[1]) + " > /dev/null" for l in m["layers"]))
PY
}

# generate DIR STAMP ARGS...: run mkbase once per STAMP.
generate() {
  local dir=$1 stamp=$2
  shift 2
  if [ "$(cat "$dir.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "generating $dir ($stamp, once)..." >&2
    rm -rf "$dir" "$dir.stamp"
    go -C tool run -tags "$TAGS" ./internal/mkbase -o "$(realpath -m "$dir")" "$@" >/dev/null
    echo "$stamp" >"$dir.stamp"
  fi
}

# build_cmd BASE OUT CACHE [FLAGS...]: the mcbake build command line.
build_cmd() { local base=$1 out=$2 cache=$3; shift 3; echo "$mcbake build --quiet --base $base -f $mc -o $out --signature-policy $policy --cache-dir $cache $*"; }
diff_cmd() { local base=$1 image=$2 cache=$3; shift 3; echo "$mcbake diff --quiet --format json --base $base --image $image --signature-policy $policy --cache-dir $cache $*"; }
# cold CACHE CMD: run CMD with an empty cache.
cold() { echo "rm -rf $1; $2"; }

# buildah_time FROM COMMIT [STORE-FLAGS...]: Debian's buildah CLI from /
# copy of the rendered files / commit, in its own store unless flags name
# one; "skipped" when not root or no buildah. A path component starting
# with "_" is not a valid container name for buildah 1.28, and it must be
# lowercase: references go through a link.
buildah_time() {
  $buildah || { echo skipped; return; }
  [ -d "$B/rendered" ] || $mcbake render -f "$mc" -o "$B/rendered" >/dev/null
  local from=$1 commit=$2 fresh=
  shift 2
  local g=("$@")
  if [ ${#g[@]} = 0 ]; then # a fresh store of its own
    g=(--root "$B/buildah-store/root" --runroot "$B/buildah-store/run" --storage-driver overlay)
    fresh="rm -rf $B/buildah-store"
  fi
  local script
  script=$(cat <<EOF2
set -e
$fresh
c=\$(buildah ${g[*]} from --quiet --signature-policy $policy $from)
buildah ${g[*]} copy "\$c" "$B/rendered/rootfs" / >/dev/null
buildah ${g[*]} commit --quiet --signature-policy $policy "\$c" $commit >/dev/null
buildah ${g[*]} rm "\$c" >/dev/null
EOF2
)
  RUNS=1 median bash -c "$script" || true
}

link=/tmp/mcbakebench.$$ && ln -sfn "$Babs" "$link" && trap 'rm -f "$link"' EXIT

# --- 1. the RHCOS-like base ---------------------------------------------
if [ "${BENCH_PLAIN:-1}" = 1 ]; then
  generate "$B/base" "$SIZE-$FILES-$LAYERS" -size "$SIZE" -files "$FILES" -layers "$LAYERS"
  base="oci:$B/base:latest"
  t_gzip=$(median bash -c "$(decompress_cmd "$B/base")")
  t_cold=$(median bash -c "$(cold "$B/cache-cold" "$(build_cmd "$base" "oci:$B/out-cold:latest" "$B/cache-cold")")")
  rss_cold_build=$(rm -rf "$B/cache-cold"; measure $(build_cmd "$base" "oci:$B/out-cold:latest" "$B/cache-cold") | cut -d' ' -f2)
  $(build_cmd "$base" "oci:$B/out-warm:latest" "$B/cache-warm") >/dev/null
  t_warm=$(median_fine $(build_cmd "$base" "oci:$B/out-warm:latest" "$B/cache-warm"))
  # The revert guard's cost on the warm path: the same build without it.
  $(build_cmd "$base" "oci:$B/out-noguard:latest" "$B/cache-warm" --no-revert-guard) >/dev/null
  t_warm_noguard=$(median_fine $(build_cmd "$base" "oci:$B/out-noguard:latest" "$B/cache-warm" --no-revert-guard))
  t_cold_diff=$(median bash -c "$(cold "$B/cache-diff" "$(diff_cmd "$base" "oci:$B/out-warm:latest" "$B/cache-diff")")")
  rss_cold_diff=$(rm -rf "$B/cache-diff"; measure $(diff_cmd "$base" "oci:$B/out-warm:latest" "$B/cache-diff") | cut -d' ' -f2)
  t_warm_diff=$(median_fine $(diff_cmd "$base" "oci:$B/out-warm:latest" "$B/cache-warm"))
  t_buildah=$(buildah_time "oci:$link/base:latest" "oci:$link/out-buildah:latest")
fi

# --- 2. the ostree-shaped base in three forms ----------------------------
ostamp="$OSIZE-$OFILES-$OLAYERS-ostree"
bulk=$((OLAYERS - 4)) # testbase's four default layers come first
if [ "$(cat "$B/ostree.stamp" 2>/dev/null)" != "$ostamp" ] || { $root && [ ! -d "$B/store" ]; }; then
  rm -rf "$B/ostree.stamp" "$B/ostree-chunked" "$B/store"
  storage=()
  $root && storage=(-storage localhost/mcbake-bench/ostree:latest "${store[@]}")
  generate "$B/ostree" "$ostamp" -size "$OSIZE" -files "$OFILES" -layers "$bulk" -ostree -chunked "$Babs/ostree-chunked" "${storage[@]}"
fi
ogzip="oci:$B/ostree:latest" ochunked="oci:$B/ostree-chunked:latest" ostore="containers-storage:localhost/mcbake-bench/ostree:latest"
o_gzip=$(median bash -c "$(decompress_cmd "$B/ostree")")
# what any run of the binary costs before it does anything: the floor
# under the warm targets
t_floor=$(median_fine $mcbake version)
declare -A cold_b warm_b cold_d warm_d rss buildah_t
forms=(gzip zstd:chunked)
$root && forms+=(containers-storage)
for f in "${forms[@]}"; do
  case $f in
  gzip) base=$ogzip out="oci:$B/ostree-out-gzip:latest" flags=() ;;
  zstd:chunked) base=$ochunked out="oci:$B/ostree-out-chunked:latest" flags=() ;;
  containers-storage) base=$ostore out="containers-storage:localhost/mcbake-bench/ostree-out:latest" flags=("${store[@]}") ;;
  esac
  c="$B/ocache-${f//:/-}" w="$B/ocache-warm-${f//:/-}"
  cold_b[$f]=$(median bash -c "$(cold "$c" "$(build_cmd "$base" "$out" "$c" "${flags[@]}")")")
  rss[$f]=$(rm -rf "$c"; measure $(build_cmd "$base" "$out" "$c" "${flags[@]}") | cut -d' ' -f2)
  rm -rf "$w"; $(build_cmd "$base" "$out" "$w" "${flags[@]}") >/dev/null
  warm_b[$f]=$(median_fine $(build_cmd "$base" "$out" "$w" "${flags[@]}"))
  cold_d[$f]=$(median bash -c "$(cold "$c" "$(diff_cmd "$base" "$out" "$c" "${flags[@]}")")")
  warm_d[$f]=$(median_fine $(diff_cmd "$base" "$out" "$w" "${flags[@]}"))
  case $f in
  gzip) buildah_t[$f]=$(buildah_time "oci:$link/ostree:latest" "oci:$link/ostree-out-buildah:latest") ;;
  zstd:chunked) buildah_t[$f]=$(buildah_time "oci:$link/ostree-chunked:latest" "oci:$link/ostree-out-buildah:latest") ;;
  containers-storage) buildah_t[$f]=$(buildah_time "$ostore" "containers-storage:localhost/mcbake-bench/ostree-out-buildah:latest" "${bstore[@]}") ;;
  esac
done

# the gzip form's cold build with the Go decoder too, when ISA-L serves
t_go_cold=
if [ "$($mcbake version | sed -n 's/^gzip decoder: //p')" = isa-l ]; then
  c="$B/ocache-go-gzip"
  t_go_cold=$(median bash -c "$(cold "$c" "MCBAKE_GZIP_DECODER=go $(build_cmd "$ogzip" "oci:$B/ostree-out-gzip:latest" "$c")")")
fi

# --- 3. peak memory at 500k entries --------------------------------------
MFILES=${BENCH_MEM_FILES:-250000}
declare -A mem_rss mem_warm
mforms=()
if [ "${BENCH_MEM:-1}" = 1 ]; then
  mstore=(--storage-root "$Babs/mstore/root" --storage-runroot "$Babs/mstore/run" --storage-driver overlay)
  mstamp="256MiB-$MFILES-$OLAYERS-ostree"
  if [ "$(cat "$B/mem.stamp" 2>/dev/null)" != "$mstamp" ] || { $root && [ ! -d "$B/mstore" ]; }; then
    rm -rf "$B/mem.stamp" "$B/mem-chunked" "$B/mstore"
    storage=()
    $root && storage=(-storage localhost/mcbake-bench/mem:latest "${mstore[@]}")
    generate "$B/mem" "$mstamp" -size 256MiB -files "$MFILES" -layers "$bulk" -ostree -chunked "$Babs/mem-chunked" "${storage[@]}"
  fi
  mforms=(gzip zstd:chunked)
  $root && mforms+=(containers-storage)
  for f in "${mforms[@]}"; do
    case $f in
    gzip) base="oci:$B/mem:latest" out="oci:$B/mem-out-gzip:latest" flags=() ;;
    zstd:chunked) base="oci:$B/mem-chunked:latest" out="oci:$B/mem-out-chunked:latest" flags=() ;;
    containers-storage) base="containers-storage:localhost/mcbake-bench/mem:latest" out="containers-storage:localhost/mcbake-bench/mem-out:latest" flags=("${mstore[@]}") ;;
    esac
    c="$B/mcache-${f//:/-}"
    mem_rss[$f]=$(rm -rf "$c"; measure $(build_cmd "$base" "$out" "$c" "${flags[@]}") | cut -d' ' -f2)
    mem_warm[$f]=$(measure $(build_cmd "$base" "$out" "$c" "${flags[@]}") | cut -d' ' -f2)
  done
fi

# --- 4. prepare-revert at 2,000 and 100,000 owned paths -------------------
node_lines=()
if [ "${BENCH_NODE:-1}" = 1 ] && $root && command -v ostree >/dev/null; then
  # go test prints: NAME-CPUS 1 NS ns/op PEAK peak-RSS-MB BYTES B/op ALLOCS allocs/op
  while read -r name _ ns _ peak _ bytes _; do
    name=${name#BenchmarkPrepare/}
    node_lines+=("$(printf '  %-22s %8.1fs   peak RSS %5.0f MB   allocated %6.0f MB' "${name%-*}" "$(awk -v n="$ns" 'BEGIN{print n/1e9}')" "$peak" "$(awk -v b="$bytes" 'BEGIN{print b/1048576}')")")
  done < <(go test -count=1 -timeout 60m -run '^$' -bench 'BenchmarkPrepare' -benchtime 1x -benchmem ./node/ | grep '^BenchmarkPrepare/')
fi

buildah_line() { # TIME COLD WARM
  case $1 in
  skipped) echo "skipped    (not root, no buildah, or BENCH_BUILDAH=0)" ;;
  "") echo "failed     (see above)" ;;
  *) echo "${1}s     $(ratio "$1" "$2")x a cold mcbake build, $(ratio "$1" "$3")x a warm one" ;;
  esac
}

# --- 5. valid MachineConfigs at the input limit (64 MiB) ---------------
# A 60 MB MachineConfig, one 44 MiB file or 20,000 files of 2.2 KiB:
# render and verify, one run each, time and peak RSS (BENCH_LIMITS=0
# skips it). A real rendered config is 170 KB.
limit_lines=()
if [ "${BENCH_LIMITS:-1}" = 1 ]; then
  [ -s "$B/limit-one.json" ] || python3 - "$B" <<'PY'
import base64, json, random, sys
d = sys.argv[1]
rnd = random.Random(1)
def mc(name, files):
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}}
def f(p, n):
    return {"path": p, "mode": 420, "overwrite": True, "contents": {"source": "data:;base64," + base64.b64encode(rnd.randbytes(n)).decode()}}
json.dump(mc("99-one", [f("/etc/big.bin", 44 << 20)]), open(f"{d}/limit-one.json", "w"))
json.dump(mc("99-many", [f(f"/etc/many/f{i:05d}.conf", 2200) for i in range(20000)]), open(f"{d}/limit-many.json", "w"))
PY
  for shape in one many; do
    mcf="$B/limit-$shape.json"
    read -r t1 m1 < <(rm -rf "$B/limit-out"; measure $mcbake render -f "$mcf" -o "$B/limit-out")
    read -r t2 m2 < <(measure $mcbake verify --fail-on never -f "$mcf")
    limit_lines+=("$(printf '  %-38s render %5.1fs peak RSS %4d MB   verify %5.1fs peak RSS %4d MB' "$(basename "$mcf") ($(($(stat -c %s "$mcf") / 1000000)) MB)" "$t1" "$(mb "$m1")" "$t2" "$(mb "$m2")")")
  done
  rm -rf "$B/limit-out"
fi

# --- 6. a cold CI runner against a registry ------------------------------
reg_lines=()
if [ "${BENCH_REGISTRY:-1}" = 1 ] && command -v docker-registry >/dev/null && command -v skopeo >/dev/null; then
  RSIZE=${BENCH_REG_SIZE:-$SIZE} RFILES=${BENCH_REG_FILES:-$FILES}
  generate "$B/regbase" "$RSIZE-$RFILES-8-chunked" -size "$RSIZE" -files "$RFILES" -layers 8 -chunked "$Babs/regbase-chunked"
  rm -rf "$B/registry" && mkdir -p "$B/registry"
  rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  reg=127.0.0.1:$rport
  printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/registry/data\nhttp:\n  addr: %s\n' "$Babs" "$reg" >"$B/registry/config.yml"
  docker-registry serve "$B/registry/config.yml" >"$B/registry/log" 2>&1 &
  rpid=$!
  trap 'kill "$rpid" 2>/dev/null || true; rm -f "$link"' EXIT
  for _ in $(seq 100); do curl -sf "http://$reg/v2/" >/dev/null && break; sleep 0.1; done
  # the bench's policy accepts local transports only; this registry's
  # base too (a later --signature-policy replaces build_cmd's)
  echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$B/registry/policy.json"
  insecure=(--tls-verify=false --signature-policy "$B/registry/policy.json")
  skopeo copy --quiet --insecure-policy --dest-tls-verify=false "oci:$B/regbase:latest" "docker://$reg/bench/base:latest"
  skopeo copy --quiet --insecure-policy --dest-tls-verify=false "oci:$B/regbase-chunked:latest" "docker://$reg/bench/chunked:latest"
  # the ostree-shaped base of section 2 (48 layers), gzip
  skopeo copy --quiet --insecure-policy --dest-tls-verify=false "oci:$B/ostree:latest" "docker://$reg/bench/ostree:latest"
  # layout_bytes DIR: the bytes of an OCI layout's layers and config
  layout_bytes() {
    python3 - "$1" <<'PY'
import json, sys
d = sys.argv[1]
idx = json.load(open(f"{d}/index.json"))
m = json.load(open(f"{d}/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])
PY
  }
  base_bytes=$(layout_bytes "$B/regbase")
  ostree_bytes=$(layout_bytes "$B/ostree")
  # reg_run CMD: REG_RUNS cold runs of CMD (its cache emptied first, a
  # build's destination a new repository each time): "secs bytes", the
  # median time and the bytes the registry sent (blobs and manifests) per
  # its access log, the same each run.
  REG_RUNS=${BENCH_REG_RUNS:-3}
  reg_run() {
    local before bytes ts=()
    for _ in $(seq "$REG_RUNS"); do
      before=$(wc -l <"$B/registry/log")
      ts+=("$(measure bash -c "$1" | cut -d' ' -f1)")
      bytes=$(tail -n +"$((before + 1))" "$B/registry/log" | awk '$6 == "\"GET" && $7 ~ /\/(blobs|manifests)\// && ($9 == 200 || $9 == 206) { n += $10 } END { print n + 0 }')
    done
    echo "$(printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') $bytes"
  }
  rc="$B/reg-cache"
  # index_push BASE INDEX: publish the index of bench/BASE to bench/INDEX
  index_push() {
    $mcbake index push --base "docker://$reg/bench/$1:latest" --index-repo "$reg/bench/$2" \
      --cache-dir "$B/reg-push-cache-$1" "${insecure[@]}" >/dev/null 2>"$B/cmd.err" || { cat "$B/cmd.err" >&2; exit 1; }
  }
  rbuild() { echo "rm -rf $rc; $(build_cmd "docker://$reg/bench/$1:latest" "docker://$reg/bench/out-$2-\$RANDOM\$RANDOM:latest" "$rc" "${insecure[@]}" --no-publish-index "${@:3}")"; }
  rverify() { echo "rm -rf $rc; $mcbake verify --quiet --fail-on never -f $mc --base docker://$reg/bench/$1:latest --cache-dir $rc ${insecure[*]} --no-publish-index ${*:2}"; }
  read -r s_skopeo b_skopeo < <(reg_run "rm -rf $B/reg-skopeo; skopeo copy --quiet --insecure-policy --src-tls-verify=false docker://$reg/bench/base:latest oci:$B/reg-skopeo:latest")
  read -r s_scan b_scan < <(reg_run "$(rbuild base scan)")
  read -r s_vscan b_vscan < <(reg_run "$(rverify base)")
  index_push base index
  read -r s_index b_index < <(reg_run "$(rbuild base index --index-repo "$reg/bench/index")")
  read -r s_vindex b_vindex < <(reg_run "$(rverify base --index-repo "$reg/bench/index")")
  read -r s_chunk b_chunk < <(reg_run "$(rbuild chunked chunked)")
  read -r s_vchunk b_vchunk < <(reg_run "$(rverify chunked)")
  read -r s_oscan b_oscan < <(reg_run "$(rbuild ostree oscan)")
  index_push ostree oindex
  read -r s_oindex b_oindex < <(reg_run "$(rbuild ostree oindex --index-repo "$reg/bench/oindex")")
  pct() { awk -v a="$1" -v b="${2:-$base_bytes}" 'BEGIN { printf "%.2f%%", 100 * a / b }'; }
  line() { printf '  %-36s %7.2fs  %12d bytes  %7s of the base  %5sx the scanning time%s' "$1" "$2" "$3" "$(pct "$3" "${6:-}")" "$(ratio "$2" "$4")" "$5"; }
  reg_lines+=("$(line "skopeo copy of the base" "$s_skopeo" "$b_skopeo" "$s_scan" "   [floor of a pull]")")
  reg_lines+=("$(line "mcbake build, cold, scanning" "$s_scan" "$b_scan" "$s_scan" "")")
  reg_lines+=("$(line "mcbake build, cold, published index" "$s_index" "$b_index" "$s_scan" "   (target <= 1%, <= 0.1x)")")
  reg_lines+=("$(line "mcbake build, cold, zstd:chunked" "$s_chunk" "$b_chunk" "$s_scan" "   (target <= 3%)")")
  reg_lines+=("$(line "mcbake verify, cold, scanning" "$s_vscan" "$b_vscan" "$s_vscan" "")")
  reg_lines+=("$(line "mcbake verify, cold, published index" "$s_vindex" "$b_vindex" "$s_vscan" "   (target <= 1%, <= 0.1x)")")
  reg_lines+=("$(line "mcbake verify, cold, zstd:chunked" "$s_vchunk" "$b_vchunk" "$s_vscan" "   (target <= 3%)")")
  reg_lines+=("")
  reg_lines+=("  the ostree-shaped base of section 2 ($OSIZE / $OFILES files / $OLAYERS layers, gzip, $ostree_bytes bytes):")
  reg_lines+=("$(line "mcbake build, cold, scanning" "$s_oscan" "$b_oscan" "$s_oscan" "" "$ostree_bytes")")
  reg_lines+=("$(line "mcbake build, cold, published index" "$s_oindex" "$b_oindex" "$s_oscan" "   (target <= 1%, <= 0.1x)" "$ostree_bytes")")
  kill "$rpid" 2>/dev/null || true
  wait "$rpid" 2>/dev/null || true
fi

# report prints the figures; they go to the terminal, to $B/report.txt
# and into docs/benchmarks.md's generated section (BENCH_DOC=0 leaves the
# document alone: a run with smaller bases, say).
report() {
  decoder=$($mcbake version | sed -n 's/^gzip decoder: //p')
  echo "mcbake bench, median of $RUNS runs ($(nproc) cores), gzip decoder: $decoder"
  if [ "${BENCH_PLAIN:-1}" = 1 ]; then
    cat <<EOF2

RHCOS-like base: $SIZE / $FILES files / $LAYERS layers
  decompress base layers (gzip -dc) ${t_gzip}s      [anchor]
  mcbake build, cold cache          ${t_cold}s      $(ratio "$t_cold" "$t_gzip")x decompression   (target <= 1.3x)   peak RSS $(mb "$rss_cold_build") MB
  mcbake build, warm cache          ${t_warm}s      $(ms "$t_warm") ms              (target <= 100 ms)
    ... --no-revert-guard           ${t_warm_noguard}s      $(ms "$t_warm_noguard") ms: the guard (a 12 MB binary in the layer) costs $(awk -v a="$t_warm" -v b="$t_warm_noguard" 'BEGIN { printf "%.0f", (a - b) * 1000 }') ms
  buildah CLI from/copy/commit      $(buildah_line "$t_buildah" "$t_cold" "$t_warm") (target >= 20x)
  mcbake diff, cold cache           ${t_cold_diff}s      $(ratio "$t_cold_diff" "$t_gzip")x decompression   (target <= 1.3x)   peak RSS $(mb "$rss_cold_diff") MB (target <= 200 MB)
  mcbake diff, warm cache           ${t_warm_diff}s      $(ms "$t_warm_diff") ms              (target <= 100 ms)
EOF2
  fi
  echo
  echo "ostree-shaped base: $OSIZE / $OFILES files (each an object and a hard link) / $OLAYERS layers"
  echo "  decompress the gzip form's layers  ${o_gzip}s      [anchor]"
  echo "  mcbake version (the floor)         ${t_floor}s      $(ms "$t_floor") ms: package initialisation, before any work"
  for f in "${forms[@]}"; do
    case $f in
    gzip) target="<= 0.6x" ;;
    *) target="<= 0.1x" ;;
    esac
    cat <<EOF2
  $f
    mcbake build, cold cache        ${cold_b[$f]}s      $(ratio "${cold_b[$f]}" "$o_gzip")x decompression   (target $target)   peak RSS $(mb "${rss[$f]}") MB
    mcbake build, warm cache        ${warm_b[$f]}s      $(ms "${warm_b[$f]}") ms              (target <= 30 ms)
    buildah CLI from/copy/commit    $(buildah_line "${buildah_t[$f]}" "${cold_b[$f]}" "${warm_b[$f]}")
    mcbake diff, cold cache         ${cold_d[$f]}s      $(ratio "${cold_d[$f]}" "$o_gzip")x decompression
    mcbake diff, warm cache         ${warm_d[$f]}s      $(ms "${warm_d[$f]}") ms              (target <= 15 ms)
EOF2
    if [ "$f" = gzip ] && [ -n "$t_go_cold" ]; then
      echo "    ... cold, Go's gzip decoder     ${t_go_cold}s      $(ratio "$t_go_cold" "$o_gzip")x decompression (MCBAKE_GZIP_DECODER=go)"
      if awk -v g="$t_go_cold" -v i="${cold_b[gzip]}" 'BEGIN { exit !(g < i) }'; then
        echo "    WARNING: ISA-L's build is slower than Go's decoder's here: a regression (TestISALClearsUpper is one)"
      fi
    fi
  done
  $root || echo "  containers-storage: skipped (not root)"
  if [ ${#mforms[@]} -gt 0 ]; then
    echo
    echo "peak memory: the ostree shape with $MFILES files (over $((MFILES * 2)) entries) / $OLAYERS layers, one cold and one warm build"
    for f in "${mforms[@]}"; do
      printf '  %-20s cold build peak RSS %s MB (target <= 200 MB), warm %s MB\n' "$f" "$(mb "${mem_rss[$f]}")" "$(mb "${mem_warm[$f]}")"
    done
  fi
  if [ ${#node_lines[@]} -gt 0 ]; then
    echo
    echo "mcbake-node prepare-revert (node.Prepare) on real-ostree deployments, owned files under /etc, one run each (the staging is not counted)"
    printf '%s\n' "${node_lines[@]}"
  else
    echo
    echo "mcbake-node prepare-revert: skipped (not root, no ostree, or BENCH_NODE=0)"
  fi
  if [ ${#limit_lines[@]} -gt 0 ]; then
    echo
    echo "valid MachineConfigs at the input limit (64 MiB; a real rendered config is 170 KB), one run each"
    printf '%s\n' "${limit_lines[@]}"
  fi
  if [ ${#reg_lines[@]} -gt 0 ]; then
    echo
    echo "cold CI runner, registry on 127.0.0.1 (HTTP): RHCOS-like base $RSIZE / $RFILES files / 8 layers, $base_bytes bytes (layers and config), median of $REG_RUNS runs"
    printf '%s\n' "${reg_lines[@]}"
  else
    echo
    echo "cold CI runner against a registry: skipped (no docker-registry or skopeo, or BENCH_REGISTRY=0)"
  fi
}
report | tee "$B/report.txt"
if [ "${BENCH_DOC:-1}" = 1 ]; then
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  header="\`make bench\` at $(git describe --tags --always --dirty 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d), $(nproc) cores ($cpu)"
  go run ./hack/benchdoc docs/benchmarks.md "$B/report.txt" "$header"
  echo "docs/benchmarks.md: the figures above are in its generated section"
fi

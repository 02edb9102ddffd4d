#!/usr/bin/env bash
# make demo: generate the bundled sample base (an RHCOS-like OCI layout),
# bake the bundled rendered worker MachineConfig into it, and print the
# ownership manifest summary. Everything lands in ./_demo.
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS="containers_image_openpgp exclude_graphdriver_btrfs"
out=_demo
rm -rf "$out" && mkdir -p "$out"
policy=hack/demo-policy.json
mc=testdata/machineconfigs/rendered-worker-aws.json

echo "==> generating the sample base into $out/base"
echo "base manifest digest: $(go -C tool run -tags "$TAGS" ./internal/mkbase -o "$PWD/$out/base")"

echo "==> mcbake build (cold: indexes the base)"
./bin/mcbake build --base "oci:$out/base:latest" -f "$mc" -o "oci:$out/layered:latest" \
  --signature-policy "$policy" --cache-dir "$out/cache" --digestfile "$out/digest"

echo "==> mcbake build again (warm: cached index; same digest expected)"
./bin/mcbake build --quiet --base "oci:$out/base:latest" -f "$mc" -o "oci:$out/layered2:latest" \
  --signature-policy "$policy" --cache-dir "$out/cache" >"$out/digest2"
if [ "$(cat "$out/digest")" = "$(cat "$out/digest2")" ]; then
  echo "reproducible: $(cat "$out/digest")"
else
  echo "NOT reproducible: $(cat "$out/digest") vs $(cat "$out/digest2")" >&2
  exit 1
fi

echo "==> the embedded manifest (mcbake manifest --summary)"
./bin/mcbake manifest --summary "oci:$out/layered:latest" --signature-policy "$policy" --cache-dir "$out/cache"

echo "==> what a revert from the layered image to its base would do (mcbake diff; the full table lists every path)"
./bin/mcbake diff --quiet --base "oci:$out/base:latest" --image "oci:$out/layered:latest" \
  --signature-policy "$policy" --cache-dir "$out/cache" >"$out/diff.txt"
head -n 2 "$out/diff.txt"
echo "(full table: $out/diff.txt)"

cat <<EOF
==> next, on these files (each with the image flags above: --signature-policy $policy --cache-dir $out/cache)
  ./bin/mcbake diff --base oci:$out/base:latest --image oci:$out/layered:latest --format json
  ./bin/mcbake verify -f $mc --base oci:$out/base:latest --image oci:$out/layered:latest
  ./bin/mcbake plan --base oci:$out/base:latest --image oci:$out/layered:latest -o $out/plan.json
  skopeo inspect oci:$out/layered:latest
EOF

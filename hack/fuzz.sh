#!/usr/bin/env bash
# Runs every fuzz target of both modules (each func FuzzX in a *_test.go) for
# FUZZTIME (an execution count like 10000x for make test, a duration like
# 2m for make fuzz-long), minimising failures for at most FUZZMIN.
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS=${TAGS:-"containers_image_openpgp exclude_graphdriver_btrfs"}
FUZZTIME=${FUZZTIME:-10000x}
FUZZMIN=${FUZZMIN:-200x}
git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort | while read -r f; do
  dir=./$(dirname "$f") mod=. # the module: the library's, or the tool's
  case $dir in ./tool/*) mod=tool dir=./${dir#./tool/} ;; esac
  for name in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | cut -d' ' -f2); do
    echo "fuzz: $name ($mod: $dir, $FUZZTIME)"
    go -C "$mod" test -tags "$TAGS" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMIN" "$dir" >/tmp/mcbake-fuzz.$$ 2>&1 || {
      cat /tmp/mcbake-fuzz.$$; rm -f /tmp/mcbake-fuzz.$$; exit 1; }
  done
done
rm -f /tmp/mcbake-fuzz.$$

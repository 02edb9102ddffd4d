#!/usr/bin/env bash
# mcbake-apply-plan: run by mcbake-revert.service on boot. When the booted
# image is the plan's base image, rewrite the planned paths from the staged
# MachineConfigs, check the result with `mcbake ondisk`, retire the plan so it
# runs once, and let systemd pick up the restored units.
#
# Environment (defaults are the node's real paths; tests override them):
#   MCBAKE        the mcbake binary            (/var/lib/mcbake/mcbake)
#   MCBAKE_ROOT   the root to rewrite          (/)
#   MCBAKE_STAGE  where plan and MCs are staged ($MCBAKE_ROOT/etc/mcbake/revert)
set -euo pipefail
MCBAKE=${MCBAKE:-/var/lib/mcbake/mcbake}
ROOT=${MCBAKE_ROOT:-/}
STAGE=${MCBAKE_STAGE:-${ROOT%/}/etc/mcbake/revert}
plan="$STAGE/plan.json"
mcs="$STAGE/machineconfigs"
log() { echo "mcbake-apply-plan: $*" >&2; }

[ -f "$plan" ] || { log "no plan at $plan"; exit 0; }
# JSON without a JSON tool (RHCOS has no python): flatten, then match.
flat() { tr -d ' \t\r\n'; }
want=$(flat <"$plan" | sed -n 's/.*"base":{[^}]*"digest":"\([^"]*\)".*/\1/p')
booted=$(rpm-ostree status --booted --json | flat | sed -n 's/.*"container-image-reference-digest":"\([^"]*\)".*/\1/p')
if [ -z "$want" ] || [ "$booted" != "$want" ]; then
  log "booted image ${booted:-unknown} is not the plan's base ${want:-unknown}: nothing to do"
  exit 0
fi

log "booted the plan's base $want: rewriting clobbered MachineConfig paths"
"$MCBAKE" rewrite --plan "$plan" -f "$mcs" --root "$ROOT"
if ! "$MCBAKE" ondisk -f "$mcs" --root "$ROOT" >"$STAGE/ondisk.txt"; then
  log "ondisk validation still reports mismatches (see $STAGE/ondisk.txt); /var paths are expected there only on fresh nodes"
fi
done_dir="$STAGE/done-$(date +%s)"
mkdir -p "$done_dir"
mv "$plan" "$done_dir/"
systemctl daemon-reload
systemctl --no-block start default.target
log "done; plan retired to $done_dir"

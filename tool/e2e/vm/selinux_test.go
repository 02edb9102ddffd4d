package vm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/testing/nodetest"
	"github.com/mcbake/mcbake/internal/testing/ostreevm"
	"github.com/mcbake/mcbake/node"
)

// selinuxControl is a file the SELinux scenario labels wrong on purpose:
// restorecon must list it, or its silence about the guard's paths proves
// nothing.
const selinuxControl = "/etc/mcbake-selinux-control"

// selinuxObserve records, on the first boot of B, the policy's state and
// what restorecon says of the paths the guard wrote (its record's changes
// whose op is neither unchanged, skipped nor remove) and of the control
// file, labelled var_t.
const selinuxObserve = `R=$VMTEST_RESULTS
ostree admin status > $R/status 2>&1 || true
journalctl -b -1 -o cat -u ostree-finalize-staged.service > $R/finalize.log 2>&1 || true
stat -c '%C %n' /etc /etc/modprobe.d /etc/systemd/system/multi-user.target.wants /usr/etc /usr/local > $R/etc.labels 2>&1 || true
getenforce > $R/getenforce 2>&1 || true
sestatus > $R/sestatus 2>&1 || true
cat /sys/kernel/security/lsm > $R/lsm 2>&1 || true
dmesg | grep -i -e selinux -e 'avc:' | head -n 40 > $R/selinux.dmesg || true
cp /etc/mcbake/revert/record.json $R/record.json 2>/dev/null || echo null > $R/record.json
awk -F'"' '$2 == "path" { p = $4 } $2 == "op" && $4 != "unchanged" && $4 != "skipped" && $4 != "remove" { print p }' $R/record.json |
	sort -u > $R/selinux.paths
echo control > ` + selinuxControl + `
chcon -t var_t ` + selinuxControl + ` > $R/chcon.out 2>&1 || true
while read -r p; do echo "$(stat -c %C "$p") $p"; done < $R/selinux.paths > $R/selinux.labels
stat -c %C ` + selinuxControl + ` > $R/control.label
rc=0; restorecon -n -v $(cat $R/selinux.paths) ` + selinuxControl + ` > $R/restorecon.out 2>&1 || rc=$?; echo $rc > $R/restorecon.rc
rc=0; restorecon -n -v -F $(cat $R/selinux.paths) ` + selinuxControl + ` > $R/restorecon-F.out 2>&1 || rc=$?; echo $rc > $R/restorecon-F.rc
`

var selinuxResults = []string{"status", "finalize.log", "etc.labels", "getenforce", "sestatus", "lsm", "selinux.dmesg", "record.json", "selinux.paths", "chcon.out",
	"selinux.labels", "control.label", "restorecon.out", "restorecon.rc", "restorecon-F.out", "restorecon-F.rc", "l.getenforce"}

// TestRevertGuardSELinux boots the revert guard with an SELinux policy
// loaded (permissive), in L and B as on RHCOS: the commits labelled with
// the policy, L booted, the MCD's writes, B staged, currentconfig stored,
// a reboot through the guard and the finalization, and on the first boot
// of B restorecon -n -v lists none of the paths the guard wrote, while it
// does list a file labelled wrong on purpose.
func TestRevertGuardSELinux(t *testing.T) {
	if ok, why := ostreevm.SELinuxAvailable(); !ok {
		t.Skip(why)
	}
	start := time.Now()
	root, err := ostreevm.SELinuxRootfs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SELinux root filesystem in %v", time.Since(start).Round(time.Second))
	start = time.Now()
	f := newFixtureFrom(t, root)
	t.Logf("fixture in %v", time.Since(start).Round(time.Second))
	bImage := "quay.example/ocp/rhcos@" + f.bMeta["ostree.manifest-digest"]

	res := f.run(t, scenario{kargs: ostreevm.SELinuxKargs,
		files: map[string][]byte{"lib/mcbake-test/stored.json": nodetest.StoredByDaemon(t, f.mcs[0], bImage)},
		steps: []ostreevm.Step{
			{Script: mcdWrites + "getenforce > $VMTEST_RESULTS/l.getenforce 2>&1 || true\n" + stageBase + storeConfig, Reboot: true},
			{Script: observe + guardObserve + selinuxObserve},
		},
		results: append(append([]string(nil), guardResults...), selinuxResults...)})

	for _, name := range []string{"sestatus", "selinux.labels", "restorecon.out", "restorecon-F.out"} {
		t.Logf("%s:\n%s", name, res[name])
	}
	defer func() {
		if t.Failed() {
			for _, name := range []string{"status", "finalize.log", "etc.labels", "guard.log", "lsm", "selinux.dmesg", "control.label", "chcon.out"} {
				t.Logf("%s:\n%s", name, res[name])
			}
		}
	}()
	if res["getenforce"] != "Permissive" || res["l.getenforce"] != "Permissive" {
		t.Fatalf("getenforce on L: %q, on B: %q; want Permissive (the policy loaded)", res["l.getenforce"], res["getenforce"])
	}
	for _, want := range []string{"SELinux status:                 enabled", "Loaded policy name:             " + ostreevm.SELinuxPolicy, "Current mode:                   permissive"} {
		if !strings.Contains(res["sestatus"], want) {
			t.Errorf("sestatus lacks %q:\n%s", want, res["sestatus"])
		}
	}
	// B booted: its finalization (which runs semodule under bwrap when
	// /etc/selinux/config exists) succeeded.
	if lines := strings.SplitN(res["status"], "\n", 3); len(lines) < 2 || !strings.HasPrefix(lines[0], "* ") || !strings.Contains(lines[1], "os/base") {
		t.Fatalf("the first boot after the revert is not B's:\n%s\nfinalization:\n%s", res["status"], res["finalize.log"])
	}
	// The deployments are labelled as on RHCOS: /etc's directories too,
	// the commit's /usr.
	if strings.Contains(res["etc.labels"], "unlabeled_t") || strings.Count(res["etc.labels"], "system_u:object_r:") != 5 {
		t.Errorf("B's labels:\n%s", res["etc.labels"])
	}
	checkFiles(t, res)
	if rep := guardReport(t, res); rep.Action != node.GuardPrepared || rep.Written == 0 {
		t.Fatalf("the guard's report: %+v, want the staged base prepared", rep)
	}

	// The paths the guard wrote, from its record in B's /etc.
	var records []*node.Record
	if err := json.Unmarshal([]byte(res["record.json"]), &records); err != nil || len(records) == 0 {
		t.Fatalf("the guard's record: %v\n%s", err, res["record.json"])
	}
	written := records[len(records)-1].Written()
	if len(written) == 0 {
		t.Fatal("the guard's record lists no write")
	}
	labels := map[string]string{} // path -> context on B
	for _, l := range strings.Split(res["selinux.labels"], "\n") {
		if ctx, p, ok := strings.Cut(l, " "); ok {
			labels[p] = ctx
		}
	}
	var paths []string
	for _, c := range written {
		got, ok := labels[c.Path]
		switch {
		case c.Op == "remove":
			if ok {
				t.Errorf("%s: removed by the guard, on the first boot of B", c.Path)
			}
			continue
		case !ok:
			t.Errorf("%s: written by the guard, not on the first boot of B", c.Path)
		case c.Label == "":
			t.Errorf("%s: the guard wrote no label", c.Path)
		case got != c.Label || strings.Contains(got, ":unlabeled_t:"):
			t.Errorf("%s: labelled %s on B, the guard wrote %s", c.Path, got, c.Label)
		}
		paths = append(paths, c.Path)
	}
	slices.Sort(paths)
	if got := strings.Fields(res["selinux.paths"]); !slices.Equal(got, paths) {
		t.Errorf("restorecon ran on %q, the guard wrote %q", got, paths)
	}

	// restorecon -n -v prints "Would relabel PATH from OLD to NEW" for each
	// path whose type is not the policy's (with -F: whose context is not).
	if !strings.Contains(res["control.label"], ":var_t:") {
		t.Fatalf("the control file is labelled %q (chcon: %s), want var_t", res["control.label"], res["chcon.out"])
	}
	for _, name := range []string{"restorecon.out", "restorecon-F.out"} {
		out := res[name]
		if !strings.Contains(out, " "+selinuxControl+" from ") {
			t.Errorf("%s does not list the control file %s labelled var_t: the check cannot fail:\n%s", name, selinuxControl, out)
		}
		for _, c := range written {
			if strings.Contains(out, " "+c.Path+" from ") {
				t.Errorf("%s lists %s, which the guard wrote labelled %s", name, c.Path, c.Label)
			}
		}
	}
	if res["restorecon.rc"] != "0" || res["restorecon-F.rc"] != "0" {
		t.Errorf("restorecon exited %s, with -F %s", res["restorecon.rc"], res["restorecon-F.rc"])
	}
	t.Logf("restorecon -n -v listed none of the %d paths the guard wrote (and removed %d)", len(paths), len(written)-len(paths))
}

// Package systemdtest replays the machine-config-daemon's writes with real systemctl.
//
// It does what the daemon does with files and systemd units on a directory,
// with the real `systemctl --root`: the judge of render's systemd
// differential tests. It follows the MCD's update (docs/design.md, "What the
// machine-config-daemon writes"): files first, then per unit its drop-ins,
// its mask, the disabling of an enabled unit before its file is rewritten,
// its unmask, and `systemctl preset` for a unit without enabled; then one
// `systemctl enable` and one `systemctl disable` of the units with enabled
// set that have contents or a unit file `systemctl list-unit-files` lists.
// As the MCD reaches systemd over D-Bus, a call also fails when every change
// it reports is a failure.
package systemdtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// UnitDir is where the MCD writes units.
const UnitDir = "etc/systemd/system"

// File is a storage file as the MCD writes it.
type File struct {
	Path    string
	Content []byte
	Mode    os.FileMode
}

// Systemctl returns the path of systemctl, or an error saying why the
// replay cannot run.
func Systemctl() (string, error) {
	p, err := exec.LookPath("systemctl")
	if err != nil {
		return "", fmt.Errorf("systemctl not found (install systemd): %w", err)
	}
	return p, nil
}

// Replayer runs the replay with one systemctl binary.
type Replayer struct {
	Systemctl string
	// Log, when set, receives every systemctl command and its output.
	Log func(format string, args ...any)
}

// Replay applies files and units to the tree at root as the MCD does and
// returns the error the MCD would stop with, or nil.
func (rp *Replayer) Replay(root string, files []File, units []types.Unit) error {
	for _, f := range files {
		if err := writeAtomically(filepath.Join(root, f.Path), f.Content, f.Mode); err != nil {
			return fmt.Errorf("writing file %s: %w", f.Path, err)
		}
	}
	var listed map[string]bool
	for _, u := range units {
		if u.Enabled != nil && !hasContent(u.Contents) {
			// Listed once, before any unit is written, as the MCD does.
			var err error
			if listed, err = rp.listUnitFiles(root); err != nil {
				return err
			}
			break
		}
	}
	var enable, disable []string
	for _, u := range units {
		if err := rp.writeUnit(root, u); err != nil {
			return fmt.Errorf("writing unit %s: %w", u.Name, err)
		}
		switch {
		case u.Enabled == nil:
			rp.run(root, "preset", u.Name) // the MCD ignores a failed preset
		case !hasContent(u.Contents) && !listed[u.Name]:
		case *u.Enabled:
			enable = append(enable, u.Name)
		default:
			disable = append(disable, u.Name)
		}
	}
	if len(enable) > 0 {
		if err := rp.call(root, "enable", enable...); err != nil {
			return err
		}
	}
	if len(disable) > 0 {
		if err := rp.call(root, "disable", disable...); err != nil {
			return err
		}
	}
	// deleteStaleData's workaroundOcpBugs33694.
	for _, p := range []string{
		"/etc/systemd/system/network-online.target.requires/node-valid-hostname.service",
		"/etc/systemd/system/network-online.target.wants/ovs-configuration.service",
	} {
		if err := os.Remove(filepath.Join(root, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting %q: %w", p, err)
		}
	}
	return nil
}

func hasContent(c *string) bool { return c != nil && *c != "" }

// writeUnit is the MCD's writeUnit.
func (rp *Replayer) writeUnit(root string, u types.Unit) error {
	for _, d := range u.Dropins {
		p := filepath.Join(root, UnitDir, u.Name+".d", d.Name)
		if !hasContent(d.Contents) {
			if _, err := os.Stat(p); err == nil {
				if err := os.Remove(p); err != nil {
					return err
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := writeAtomically(p, []byte(*d.Contents), 0o644); err != nil {
			return err
		}
	}
	p := filepath.Join(root, UnitDir, u.Name)
	switch {
	case u.Mask != nil && *u.Mask:
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		tmp := p + ".mcbake-tmp"
		if err := os.Symlink("/dev/null", tmp); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	case hasContent(u.Contents):
		if out, code := rp.IsEnabled(root, u.Name); code == 0 && out == "enabled" {
			if err := rp.call(root, "disable", u.Name); err != nil {
				return fmt.Errorf("disabling before rewriting: %w", err)
			}
		}
		return writeAtomically(p, []byte(*u.Contents), 0o644)
	case u.Mask != nil:
		return os.RemoveAll(p)
	}
	return nil
}

// writeAtomically is the MCD's writeFileAtomically: parents 0755, a
// temporary file renamed over the path.
func writeAtomically(p string, content []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".mcbake-tmp"
	if err := os.WriteFile(tmp, content, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// listUnitFiles is the MCD's listSystemdUnits (D-Bus ListUnitFiles).
func (rp *Replayer) listUnitFiles(root string) (map[string]bool, error) {
	out, code := rp.run(root, "list-unit-files", "--no-legend", "--no-pager", "--full")
	if code == 1 && strings.TrimSpace(out) == "" {
		return map[string]bool{}, nil // no unit files at all
	}
	if code != 0 {
		return nil, fmt.Errorf("systemctl list-unit-files: exit %d: %s", code, out)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names[f[0]] = true
		}
	}
	return names, nil
}

// call runs a systemctl verb that the MCD checks, failing as the D-Bus
// call fails: on an error exit, or when systemctl reported failures and
// no change.
func (rp *Replayer) call(root, verb string, names ...string) error {
	out, code := rp.run(root, append([]string{verb}, names...)...)
	if code != 0 {
		return fmt.Errorf("systemctl %s %s: exit %d: %s", verb, strings.Join(names, " "), code, strings.TrimSpace(out))
	}
	bad, good := false, false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Failed to enable auxiliary unit"):
			good = true
		case strings.HasPrefix(l, "Failed to "):
			bad = true
		case strings.HasPrefix(l, "Created symlink"), strings.HasPrefix(l, "Removed "), strings.HasPrefix(l, "Unit "):
			good = true
		}
	}
	if bad && !good {
		return fmt.Errorf("systemctl %s %s: only failures (a D-Bus error on a node): %s", verb, strings.Join(names, " "), strings.TrimSpace(out))
	}
	return nil
}

// IsEnabled is `systemctl is-enabled name` on root: its answer and exit
// code. Only standard output is read: what systemctl warns of on stderr
// (a unit file line it ignores) the MCD, over D-Bus, never sees.
func (rp *Replayer) IsEnabled(root, name string) (string, int) {
	cmd := exec.Command(rp.Systemctl, "--root="+root, "is-enabled", name)
	cmd.Env = append(os.Environ(), "SYSTEMCTL_SKIP_SYSV=1", "LC_ALL=C", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=")
	out, err := cmd.Output()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return strings.TrimSpace(string(out)), code
}

// Degrading is the machine-config-daemon's on-disk check of the units'
// enablement (checkUnitEnabled) on root after Replay: the names of the
// units with contents, not masked and enabled set that systemctl
// is-enabled reports otherwise (disabled, masked or not found for
// enabled: true; enabled for enabled: false), sorted.
func (rp *Replayer) Degrading(root string, units []types.Unit) []string {
	var out []string
	for _, u := range units {
		if u.Enabled == nil || !hasContent(u.Contents) || u.Mask != nil && *u.Mask {
			continue
		}
		state, _ := rp.IsEnabled(root, u.Name)
		bad := state == "enabled" || state == "enabled-runtime"
		if *u.Enabled {
			bad = state == "disabled" || state == "masked" || state == "masked-runtime" || state == "not-found"
		}
		if bad {
			out = append(out, u.Name)
		}
	}
	sort.Strings(out)
	return out
}

// run runs systemctl --root=root args and returns its combined output and
// exit code.
func (rp *Replayer) run(root string, args ...string) (string, int) {
	cmd := exec.Command(rp.Systemctl, append([]string{"--root=" + root}, args...)...)
	cmd.Env = append(os.Environ(), "SYSTEMCTL_SKIP_SYSV=1", "LC_ALL=C", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=")
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		b.WriteString(err.Error())
	}
	if rp.Log != nil {
		rp.Log("systemctl %s: exit %d\n%s", strings.Join(args, " "), code, b.String())
	}
	return b.String(), code
}

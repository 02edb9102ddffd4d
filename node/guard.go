package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

// What the machine-config-daemon stores in the node's /etc when it has
// applied a config and staged its OS image, before it reboots: the
// target MachineConfig (json.Marshal of the object, without apiVersion
// and kind) and the target image pullspec (empty unless the pool runs an
// image the MCO built).
const (
	CurrentConfigFile = render.CurrentConfig
	CurrentImageFile  = "/etc/machine-config-daemon/currentimage"
)

// GuardFile is where, under the stateroot's /var, Guard keeps its report
// of the last shutdown it found a deployment staged at (one file,
// replaced each time).
const GuardFile = "/lib/mcbake/guard.json"

// Guard actions.
const (
	// GuardNothingStaged: no deployment is staged (a plain reboot).
	GuardNothingStaged = "nothing-staged"
	// GuardOtherTransition: the staged deployment is not the image the
	// stored config names, so the config is not the one it will run.
	GuardOtherTransition = "other-transition"
	// GuardPrepared: the staged deployment was prepared (Written paths).
	GuardPrepared = "prepared"
	// GuardFailed: nothing was written (or every write was undone).
	GuardFailed = "failed"
)

// GuardReport is what Guard did at one shutdown.
type GuardReport struct {
	SchemaVersion int       `json:"schemaVersion"`
	Time          time.Time `json:"time"`
	Action        string    `json:"action"`
	// Booted and Staged are the deployments, when found.
	Booted *Deployment `json:"booted,omitempty"`
	Staged *Deployment `json:"staged,omitempty"`
	// MachineConfig is the stored config's name; Target the image it
	// and currentimage name; StagedImage the staged commit's image.
	MachineConfig string        `json:"machineConfig,omitempty"`
	Target        string        `json:"target,omitempty"`
	StagedImage   digest.Digest `json:"stagedImage,omitempty"`
	// Written is how many owned paths were written, of Owned.
	Written int `json:"written"`
	Owned   int `json:"owned,omitempty"`
	// Swept are the temporary entries of killed runs removed from the
	// staged deployment (see SweepTemporaries), when it was not prepared.
	Swept []string `json:"swept,omitempty"`
	// Reason says why nothing was done; Error what failed.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// GuardSchemaVersion is the version of GuardReport's format.
const GuardSchemaVersion = 1

// Line is the report as one log line.
func (r *GuardReport) Line() string {
	line := r.line()
	if len(r.Swept) > 0 {
		line += fmt.Sprintf(" (removed %d temporary entries of a killed run)", len(r.Swept))
	}
	return line
}

func (r *GuardReport) line() string {
	switch r.Action {
	case GuardNothingStaged:
		return "nothing staged: nothing to do"
	case GuardOtherTransition:
		return "not preparing the staged deployment: " + r.Reason
	case GuardPrepared:
		return fmt.Sprintf("prepared the staged deployment %s for %s (%s): wrote %d of %d owned path(s)",
			r.Staged.Name(), r.MachineConfig, r.Target, r.Written, r.Owned)
	}
	return "FAILED, nothing written: " + r.Error
}

// Guard is the revert guard's work at shutdown, before ostree finalizes a
// staged deployment: when the deployment staged is the image of the
// config the machine-config-daemon stored (CurrentConfigFile and
// CurrentImageFile of the booted deployment's /etc), it prepares it for
// that config as PrepareRevert does, so that the node boots it with every
// MachineConfig path in place. It does nothing when nothing is staged, or
// when the staged deployment is another image's (the daemon has not
// stored the config of this transition). Whenever a deployment is staged
// and was not prepared, it removes the temporary entries killed runs left
// in it (SweepTemporaries). Every outcome but nothing staged is written to
// GuardFile of the stateroot's /var.
//
// The error is the report's: nothing was written (or every write was
// undone). ctx bounds the computation; once writes begin they finish.
func Guard(ctx context.Context, sysroot string, now func() time.Time) (*GuardReport, error) {
	if now == nil {
		now = time.Now
	}
	rep := &GuardReport{SchemaVersion: GuardSchemaVersion, Time: now().UTC()}
	s, err := OpenSysroot(sysroot)
	if err != nil {
		return rep.fail(err)
	}
	booted, err := s.Booted()
	if err != nil {
		return rep.fail(err)
	}
	rep.Booted = booted
	staged, err := s.Staged(booted)
	if errors.Is(err, ErrNothingStaged) || errors.Is(err, ErrStagedIsBooted) {
		rep.Action = GuardNothingStaged
		return rep, nil
	}
	if err != nil {
		return rep.fail(err)
	}
	rep.Staged = staged
	err = guardStaged(ctx, s, booted, staged, rep)
	if err != nil {
		rep.fail(err)
	}
	if rep.Action != GuardPrepared { // Prepare sweeps before it writes
		swept, serr := SweepTemporaries(ctx, sysroot)
		rep.Swept = swept
		if serr != nil {
			serr = fmt.Errorf("sweeping temporary entries: %w", serr)
			err = errors.Join(err, serr)
			if rep.Error == "" {
				rep.Error = serr.Error()
			}
		}
	}
	if werr := writeGuardReport(s, booted, rep); werr != nil {
		err = errors.Join(err, werr)
		if rep.Error == "" {
			rep.Error = werr.Error()
		}
	}
	return rep, err
}

func (r *GuardReport) fail(err error) (*GuardReport, error) {
	r.Action, r.Error = GuardFailed, err.Error()
	return r, err
}

// guardStaged reads the stored config, checks that the staged deployment
// is its image, and prepares it.
func guardStaged(ctx context.Context, s *Sysroot, booted, staged *Deployment, rep *GuardReport) error {
	etc := booted.Dir
	if s.Running {
		etc = "/" // the running /etc, which ostree-prepare-root mounted from the deployment
	}
	live, err := fstree.Open(etc)
	if err != nil {
		return err
	}
	defer live.Close()
	raw, err := live.ReadFile(CurrentConfigFile)
	if err != nil {
		return fmt.Errorf("the machine-config-daemon's config: %w", err)
	}
	mcs, err := machineconfig.Parse(CurrentConfigFile, raw)
	if err != nil {
		return err
	}
	if len(mcs) != 1 {
		return fmt.Errorf("%s: %d MachineConfigs, want the one the machine-config-daemon stores", CurrentConfigFile, len(mcs))
	}
	rep.MachineConfig = mcs[0].Name
	img, err := live.ReadFile(CurrentImageFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the machine-config-daemon's image: %w", err)
	}
	rep.Target = strings.TrimSpace(string(img))
	if rep.Target == "" {
		rep.Target = mcs[0].Spec.OSImageURL
	}
	ok, why, err := stagedIsTarget(s, staged, rep)
	if err != nil {
		return err
	}
	if !ok {
		rep.Action, rep.Reason = GuardOtherTransition, why
		return nil
	}
	rec, err := Prepare(ctx, s, booted, staged, PrepareOptions{MachineConfigs: mcs})
	if rec != nil {
		rep.Written, rep.Owned = len(rec.Written()), len(rec.Changes)
	}
	if err != nil {
		return err
	}
	rep.Action = GuardPrepared
	return nil
}

// stagedIsTarget reports whether the staged deployment is the image
// rep.Target names: by the manifest digest ostree-ext records in the
// commit when Target is a digested pullspec (as the MCO's are), else by
// the container image reference of the deployment's origin.
func stagedIsTarget(s *Sysroot, staged *Deployment, rep *GuardReport) (bool, string, error) {
	if rep.Target == "" {
		return false, fmt.Sprintf("%s names no image (no osImageURL, no %s)", CurrentConfigFile, CurrentImageFile), nil
	}
	ref, err := s.Image(staged)
	if err != nil && !errors.Is(err, ErrNoImage) {
		return false, "", err
	}
	rep.StagedImage = ref.Digest
	if _, dg, ok := strings.Cut(rep.Target, "@"); ok {
		if ref.Digest == "" {
			return false, fmt.Sprintf("the staged commit records no container image, and the target is %s", rep.Target), nil
		}
		if digest.Digest(dg) != ref.Digest {
			return false, fmt.Sprintf("the staged deployment is image %s, the stored config's target is %s", ref.Digest, rep.Target), nil
		}
		return true, "", nil
	}
	origin, err := originImage(staged)
	if err != nil {
		return false, "", err
	}
	if origin != rep.Target {
		return false, fmt.Sprintf("the staged deployment's origin is %q, the stored config's target is %s (not by digest)", origin, rep.Target), nil
	}
	return true, "", nil
}

// originImage returns the container image reference of a deployment's
// origin file (CSUM.SERIAL.origin beside its directory), without its
// ostree transport ("ostree-unverified-registry:", "ostree-remote-image:REMOTE:docker://", ...).
func originImage(d *Deployment) (string, error) {
	dir, err := fstree.Open(filepath.Dir(d.Dir))
	if err != nil {
		return "", err
	}
	defer dir.Close()
	b, err := dir.ReadFile("/" + d.Name() + ".origin")
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the staged deployment's origin: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != "container-image-reference" {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.LastIndex(v, "docker://"); i >= 0 {
			return v[i+len("docker://"):], nil
		}
		if t, ref, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(t, "ostree-") {
			return ref, nil
		}
		return v, nil
	}
	return "", nil
}

// writeGuardReport replaces GuardFile under the stateroot's /var (the
// running /var on a booted system, which stays writable when /sysroot is
// mounted read-only), never following a symlink out of it.
func writeGuardReport(s *Sysroot, booted *Deployment, rep *GuardReport) error {
	dir := booted.Var()
	if s.Running {
		dir = "/var"
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	r, err := Open(dir)
	if err != nil {
		return fmt.Errorf("writing the guard's report: %w", err)
	}
	defer r.Close()
	if err := r.MkdirAll(path.Dir(GuardFile), func(string) (uint32, int, int) { return 0o755, 0, 0 }); err != nil {
		return fmt.Errorf("writing the guard's report: %w", err)
	}
	if err := r.WriteFile(GuardFile, append(b, '\n'), 0o644, 0, 0); err != nil {
		return fmt.Errorf("writing the guard's report: %w", err)
	}
	return nil
}

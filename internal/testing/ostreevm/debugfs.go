package ostreevm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The disk is read and written without mounting it, with e2fsprogs'
// debugfs. debugfs exits 0 on most errors and prints them on stderr after
// its version banner, so errors are recognized by what it prints.

// debugfs runs debugfs on disk with the commands cmds (one per line; -w
// when write) and returns its standard output and its error lines (stderr
// without the banner).
func debugfs(ctx context.Context, disk string, write bool, cmds ...string) (string, []string, error) {
	for _, c := range cmds {
		if strings.ContainsAny(c, "\n\"") {
			return "", nil, fmt.Errorf("debugfs command %q: newline or quote", c)
		}
	}
	args := []string{"-f", "-"}
	if write {
		args = append([]string{"-w"}, args...)
	}
	args = append(args, disk)
	cmd := exec.CommandContext(ctx, "debugfs", args...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("debugfs %s: %w: %s", disk, err, strings.TrimSpace(stderr.String()))
	}
	var errs []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "debugfs ") {
			errs = append(errs, l)
		}
	}
	// With -f, debugfs echoes each command on stdout as "debugfs: CMD".
	return stdout.String(), errs, nil
}

// checkDiskPath refuses paths debugfs cannot take as one argument.
func checkDiskPath(p string) (string, error) {
	p = path.Clean("/" + p)
	if strings.ContainsAny(p, " \t\n\"'\\") {
		return "", fmt.Errorf("disk path %q: whitespace, quotes and backslashes are not supported", p)
	}
	return p, nil
}

// diskCat returns the contents of the file at p (absolute in the disk's
// root); fs.ErrNotExist when there is none. Symlinks in p are followed.
func diskCat(ctx context.Context, disk, p string) ([]byte, error) {
	p, err := checkDiskPath(p)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp("", "ostreevm-dump-")
	if err != nil {
		return nil, err
	}
	name := tmp.Name()
	_ = tmp.Close()
	_ = os.Remove(name)
	defer os.Remove(name)
	// dump follows symlinks in p (and at its end) the way cat does, but
	// copes with binary contents of any size.
	_, errs, err := debugfs(ctx, disk, false, "dump "+p+" "+name)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		msg := strings.Join(errs, "; ")
		if strings.Contains(msg, "not found") {
			return nil, fmt.Errorf("%s on disk: %w (%s)", p, fs.ErrNotExist, msg)
		}
		return nil, fmt.Errorf("%s on disk: %s", p, msg)
	}
	return os.ReadFile(name)
}

// diskEntry is a directory entry listed by debugfs ls -p.
type diskEntry struct {
	Name string
	Mode uint32
	Size int64
}

// diskList lists the directory p on the disk, without "." and "..".
func diskList(ctx context.Context, disk, p string) ([]diskEntry, error) {
	p, err := checkDiskPath(p)
	if err != nil {
		return nil, err
	}
	out, errs, err := debugfs(ctx, disk, false, "ls -p "+p)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		msg := strings.Join(errs, "; ")
		if strings.Contains(msg, "not found") {
			return nil, fmt.Errorf("%s on disk: %w (%s)", p, fs.ErrNotExist, msg)
		}
		return nil, fmt.Errorf("%s on disk: %s", p, msg)
	}
	var ents []diskEntry
	for _, l := range strings.Split(out, "\n") {
		// /INODE/MODE/UID/GID/NAME/SIZE/
		f := strings.Split(strings.TrimSpace(l), "/")
		if len(f) != 8 || f[0] != "" || f[5] == "." || f[5] == ".." || f[5] == "" {
			continue
		}
		mode, err := strconv.ParseUint(f[2], 8, 32)
		if err != nil {
			continue
		}
		size, _ := strconv.ParseInt(f[6], 10, 64)
		ents = append(ents, diskEntry{Name: f[5], Mode: uint32(mode), Size: size})
	}
	return ents, nil
}

// diskWrite writes data as the regular file p on the disk, owned by root
// with mode perm, creating missing parent directories (root, 0755) and
// replacing an existing file.
func diskWrite(ctx context.Context, disk, p string, data []byte, perm os.FileMode) error {
	p, err := checkDiskPath(p)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "ostreevm-write-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// debugfs 1.47.0's mkdir of an existing directory leaks an inode
	// (and corrupts the file system one level down): only make the
	// missing ones.
	var cmds []string
	dir := path.Dir(p)
	for _, d := range parentsOf(dir) {
		switch ok, err := diskExists(ctx, disk, d); {
		case err != nil:
			return err
		case !ok:
			cmds = append(cmds, "mkdir "+d)
		}
	}
	cmds = append(cmds, "cd "+dir)
	switch ok, err := diskExists(ctx, disk, p); {
	case err != nil:
		return err
	case ok:
		cmds = append(cmds, "rm "+path.Base(p))
	}
	cmds = append(cmds, "write "+tmp.Name()+" "+path.Base(p),
		fmt.Sprintf("sif %s mode 0%o", path.Base(p), 0o100000|uint32(perm.Perm())),
		"sif "+path.Base(p)+" uid 0", "sif "+path.Base(p)+" gid 0")
	_, errs, err := debugfs(ctx, disk, true, cmds...)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing %s on disk: %s", p, strings.Join(errs, "; "))
	}
	got, err := diskCat(ctx, disk, p)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("writing %s on disk: read back %d bytes, wrote %d", p, len(got), len(data))
	}
	return nil
}

// diskExists reports whether p exists on the disk (the last component
// not followed when it is a symlink).
func diskExists(ctx context.Context, disk, p string) (bool, error) {
	_, errs, err := debugfs(ctx, disk, false, "stat "+p)
	if err != nil {
		return false, err
	}
	if len(errs) == 0 {
		return true, nil
	}
	if msg := strings.Join(errs, "; "); !strings.Contains(msg, "not found") {
		return false, fmt.Errorf("%s on disk: %s", p, msg)
	}
	return false, nil
}

// parentsOf returns "/a", "/a/b", "/a/b/c" for "/a/b/c".
func parentsOf(dir string) []string {
	var out []string
	for d := dir; d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// diskReplayJournal replays the ext4 journal of disk when it needs it (a
// guest killed before unmounting), so that debugfs sees what the guest
// wrote. It does nothing else (e2fsck -E journal_only).
func diskReplayJournal(ctx context.Context, disk string) error {
	cmd := exec.CommandContext(ctx, "e2fsck", "-p", "-E", "journal_only", disk)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 { // file system modified: journal replayed
		return nil
	}
	if err != nil {
		return fmt.Errorf("e2fsck -E journal_only %s: %w: %s", filepath.Base(disk), err, strings.TrimSpace(string(out)))
	}
	return nil
}

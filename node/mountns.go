package node

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readOnly reports whether the filesystem mounted at dir is mounted
// read-only (on RHCOS /sysroot is: sysroot.readonly=true).
func readOnly(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}

// withWritable runs fn with dir writable. When dir is mounted read-only,
// fn runs on an OS thread of its own in a private mount namespace where
// dir is remounted read-write, as ostree itself does before it writes a
// read-only sysroot: the rest of the system keeps seeing it read-only,
// and the namespace ends with the thread. Everything fn opens must be
// opened inside fn.
func withWritable(dir string, fn func() error) error {
	ro, err := readOnly(dir)
	if err != nil {
		return err
	}
	if !ro {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it exits with the goroutine, and
		// its mount namespace with it.
		runtime.LockOSThread()
		done <- inPrivateNamespace(dir, fn)
	}()
	return <-done
}

func inPrivateNamespace(dir string, fn func() error) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("making a private mount namespace to write %s: %w", dir, err)
	}
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	mp, err := mountPoint(dir)
	if err != nil {
		return err
	}
	if err := unix.Mount(mp, mp, "", unix.MS_REMOUNT|unix.MS_RELATIME, ""); err != nil {
		return fmt.Errorf("remounting %s read-write: %w", mp, err)
	}
	return fn()
}

// mountPoint returns the mount point of the filesystem dir is on: the
// longest mount point of /proc/self/mountinfo that is dir or a parent.
func mountPoint(dir string) (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	best := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if (dir == mp || mp == "/" || strings.HasPrefix(dir, mp+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return "", fmt.Errorf("no mount point holds %s", dir)
	}
	return best, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

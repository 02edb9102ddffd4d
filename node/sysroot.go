package node

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Errors OpenSysroot and Sysroot.Staged return for a sysroot a revert
// cannot be prepared in.
var (
	// ErrNothingStaged: no deployment is staged (run rpm-ostree rebase,
	// or ostree admin deploy --stage, first).
	ErrNothingStaged = errors.New("no deployment is staged")
	// ErrStagedIsBooted: the staged deployment is of the commit the node
	// runs, as rpm-ostree says "old and new refs are equal".
	ErrStagedIsBooted = errors.New("the staged deployment is the booted one (old and new refs are equal)")
	// ErrSeveralStaged: more than one deployment could be the staged one.
	ErrSeveralStaged = errors.New("more than one deployment could be the staged one")
)

// Sysroot is an ostree physical root: the directory holding ostree/ (and,
// unless booted, boot/). A booted node's sysroot is "/", whose physical
// root is mounted at /sysroot and whose /boot is its own.
type Sysroot struct {
	// Path is the directory given to OpenSysroot.
	Path string
	// Physical is where ostree/ is: /sysroot when Path is "/" on a
	// booted ostree system, else Path.
	Physical string
	// Boot is where the bootloader entries are (loader/entries).
	Boot string
	// Running is set when Path is the running system's sysroot.
	Running bool
}

// Deployment is one ostree deployment of a stateroot.
type Deployment struct {
	Stateroot string `json:"stateroot"`
	// Checksum is the deployed commit; Serial tells deployments of one
	// commit apart.
	Checksum string `json:"checksum"`
	Serial   int    `json:"serial"`
	// Dir is the deployment's root directory on the host.
	Dir string `json:"dir"`
}

// Name is CHECKSUM.SERIAL, the deployment directory's name.
func (d *Deployment) Name() string { return d.Checksum + "." + strconv.Itoa(d.Serial) }

// Var is the stateroot's persistent /var, which every deployment of it
// shares and deploys never touch.
func (d *Deployment) Var() string { return filepath.Join(filepath.Dir(filepath.Dir(d.Dir)), "var") }

// OpenSysroot opens the ostree sysroot at dir ("/" on a booted node).
func OpenSysroot(dir string) (*Sysroot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Sysroot{Path: abs, Physical: abs, Boot: filepath.Join(abs, "boot")}
	if abs == "/" {
		if _, err := os.Stat("/run/ostree-booted"); err == nil {
			s.Running, s.Physical = true, "/sysroot"
		}
	}
	if fi, err := os.Stat(filepath.Join(s.Physical, "ostree", "deploy")); err != nil {
		return nil, fmt.Errorf("sysroot %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("sysroot %s: ostree/deploy is not a directory", dir)
	}
	return s, nil
}

// BusyError is returned when another mcbake-node run holds the sysroot's
// run lock (Lock) for longer than a run waits.
type BusyError struct {
	Lock   string
	Waited time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("another mcbake-node run holds %s (waited %s)", e.Lock, e.Waited)
}

// lockWait bounds how long a run waits for another to end; lockPoll is
// how often it tries.
var lockWait, lockPoll = 10 * time.Second, 100 * time.Millisecond

// lockRuns takes the lock that makes mcbake-node runs on the sysroot one
// at a time (Prepare, Finalized, Check, SweepTemporaries): flock on the
// directory ostree/deploy of the physical root, which every sysroot has
// and which needs no write, so a read-only sysroot is locked as well. It
// tries without blocking until lockWait has passed, then returns a
// *BusyError.
func (s *Sysroot) lockRuns() (unlock func(), err error) {
	p := filepath.Join(s.Physical, "ostree", "deploy")
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() { unix.Close(fd) }, nil // closing the last descriptor unlocks
		case !errors.Is(err, unix.EWOULDBLOCK):
			unix.Close(fd)
			return nil, &os.PathError{Op: "flock", Path: p, Err: err}
		case time.Now().After(deadline):
			unix.Close(fd)
			return nil, &BusyError{Lock: p, Waited: lockWait}
		}
		time.Sleep(lockPoll)
	}
}

// Deployments lists every deployment directory of every stateroot,
// sorted by stateroot, then checksum and serial.
func (s *Sysroot) Deployments() ([]Deployment, error) {
	states, err := filepath.Glob(filepath.Join(s.Physical, "ostree", "deploy", "*", "deploy"))
	if err != nil {
		return nil, err
	}
	var out []Deployment
	for _, dir := range states {
		stateroot := filepath.Base(filepath.Dir(dir))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue // CSUM.SERIAL.origin and the like
			}
			d, ok := parseDeployment(stateroot, dir, e.Name())
			if ok {
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stateroot != out[j].Stateroot {
			return out[i].Stateroot < out[j].Stateroot
		}
		return out[i].Name() < out[j].Name()
	})
	return out, nil
}

// Deployment returns the deployment whose root directory is dir.
func (s *Sysroot) Deployment(dir string) (*Deployment, error) {
	ds, err := s.Deployments()
	if err != nil {
		return nil, err
	}
	if d := byDir(ds, filepath.Clean(dir)); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("sysroot %s: %s is not one of its deployments", s.Path, dir)
}

// parseDeployment reads a deployment directory's name, CHECKSUM.SERIAL.
func parseDeployment(stateroot, dir, name string) (Deployment, bool) {
	csum, serial, ok := strings.Cut(name, ".")
	n, err := strconv.Atoi(serial)
	if !ok || err != nil || len(csum) != 64 {
		return Deployment{}, false
	}
	return Deployment{Stateroot: stateroot, Checksum: csum, Serial: n, Dir: filepath.Join(dir, name)}, true
}

// bootEntry is one bootloader entry (loader/entries/*.conf).
type bootEntry struct {
	file       string
	version    int
	options    string
	ostree     string // the ostree= argument
	deployment string // the deployment directory it names
}

// MaxBootEntry bounds a bootloader entry: a BLS entry is a few hundred
// bytes (title, version, linux, initrd, options).
const MaxBootEntry = 64 << 10

// bootEntries reads the bootloader entries, highest version (the
// default) first. They are read as every file of a tree: inside the boot
// directory (symlinks resolved inside it: loader is one), regular files
// only, opened without blocking and without following a last symlink,
// and at most MaxBootEntry bytes each, so that a fifo, a device or a
// huge file there is an error, not a hang.
func (s *Sysroot) bootEntries() ([]bootEntry, error) {
	boot, err := Open(s.Boot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	names, err := boot.ReadDir("/loader/entries")
	if err != nil {
		return nil, err
	}
	var out []bootEntry
	for _, n := range names {
		if !strings.HasSuffix(n, ".conf") {
			continue
		}
		e, err := s.readBootEntry(boot, n)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].version > out[j].version })
	return out, nil
}

// readBootEntry reads the entry name of boot's loader/entries.
func (s *Sysroot) readBootEntry(boot *Root, name string) (bootEntry, error) {
	file := filepath.Join(s.Boot, "loader", "entries", name)
	fd, err := boot.OpenIn(path.Join("/loader/entries", name), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW)
	if err != nil {
		return bootEntry{}, fmt.Errorf("bootloader entry %s: %w", file, err)
	}
	f := os.NewFile(uintptr(fd), file)
	defer f.Close()
	b, err := readRegular(f, file, MaxBootEntry)
	if err != nil {
		return bootEntry{}, fmt.Errorf("bootloader entry: %w", err)
	}
	e := parseBootEntry(b)
	e.file = file
	if e.ostree != "" {
		e.deployment = s.resolveBootLink(e.ostree)
	}
	return e, nil
}

// parseBootEntry reads a BLS entry's version and options, and the
// ostree= argument among the options.
func parseBootEntry(b []byte) bootEntry {
	var e bootEntry
	for _, line := range strings.Split(string(b), "\n") {
		key, value, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch key {
		case "version":
			e.version, _ = strconv.Atoi(strings.TrimSpace(value))
		case "options":
			e.options = strings.TrimSpace(value)
		}
	}
	for _, arg := range strings.Fields(e.options) {
		if v, ok := strings.CutPrefix(arg, "ostree="); ok {
			e.ostree = v
		}
	}
	return e
}

// resolveBootLink follows an ostree= boot link (/ostree/boot.N/OS/BOOTCSUM/I)
// inside the physical root to the deployment directory it names; "" when
// it does not resolve to one.
func (s *Sysroot) resolveBootLink(link string) string {
	p, err := filepath.EvalSymlinks(filepath.Join(s.Physical, link))
	if err != nil {
		return ""
	}
	deploy, err := filepath.EvalSymlinks(filepath.Join(s.Physical, "ostree", "deploy"))
	if err != nil || !strings.HasPrefix(p, deploy+"/") {
		return ""
	}
	return filepath.Join(s.Physical, "ostree", "deploy", strings.TrimPrefix(p, deploy+"/"))
}

// runningEtc is the running system's /etc (a variable for the tests).
var runningEtc = "/etc"

// sameFile reports whether a and b are one inode.
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// Booted returns the deployment the node runs: on a booted system the one
// whose root is "/", or, where "/" is a composefs or overlay mount over it
// (no deployment directory is "/"), the one whose etc directory is the
// running /etc, which ostree-prepare-root mounts from the deployment;
// otherwise the default bootloader entry's (the one a boot would start,
// which is what ostree merges from when nothing is booted). The kernel
// command line's ostree= is not used: the boot links it names are
// rewritten by every deploy that is not staged.
func (s *Sysroot) Booted() (*Deployment, error) {
	ds, err := s.Deployments()
	if err != nil {
		return nil, err
	}
	if s.Running {
		var root unix.Stat_t
		if err := unix.Stat("/", &root); err != nil {
			return nil, err
		}
		for i := range ds {
			var st unix.Stat_t
			if unix.Stat(ds[i].Dir, &st) == nil && st.Dev == root.Dev && st.Ino == root.Ino {
				return &ds[i], nil
			}
		}
		for i := range ds {
			if sameFile(filepath.Join(ds[i].Dir, "etc"), runningEtc) {
				return &ds[i], nil
			}
		}
		return nil, errors.New("no deployment is the running root, nor has the running /etc (is this an ostree system?)")
	}
	entries, err := s.bootEntries()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if d := byDir(ds, e.deployment); d != nil {
			return d, nil
		}
	}
	return nil, fmt.Errorf("sysroot %s: no bootloader entry names a deployment", s.Path)
}

func byDir(ds []Deployment, dir string) *Deployment {
	for i := range ds {
		if dir != "" && ds[i].Dir == dir {
			return &ds[i]
		}
	}
	return nil
}

// Staged returns the staged deployment: the deployment that no bootloader
// entry names yet and that is not booted (ostree checks a staged
// deployment out at stage time and writes its bootloader entry when it
// finalizes it at shutdown). On a booted system /run/ostree/staged-deployment
// must exist too. It refuses, with ErrNothingStaged, ErrSeveralStaged or
// ErrStagedIsBooted, when there is no single staged deployment of another
// commit than booted's.
func (s *Sysroot) Staged(booted *Deployment) (*Deployment, error) {
	if s.Running {
		if _, err := os.Stat("/run/ostree/staged-deployment"); errors.Is(err, os.ErrNotExist) {
			return nil, ErrNothingStaged
		}
	}
	ds, err := s.Deployments()
	if err != nil {
		return nil, err
	}
	entries, err := s.bootEntries()
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, e := range entries {
		named[e.deployment] = true
	}
	var staged []Deployment
	for _, d := range ds {
		if !named[d.Dir] && d.Dir != booted.Dir {
			staged = append(staged, d)
		}
	}
	switch {
	case len(staged) == 0:
		return nil, ErrNothingStaged
	case len(staged) > 1:
		var names []string
		for _, d := range staged {
			names = append(names, d.Stateroot+"/"+d.Name())
		}
		return nil, fmt.Errorf("%w: %s", ErrSeveralStaged, strings.Join(names, ", "))
	case staged[0].Checksum == booted.Checksum:
		return nil, fmt.Errorf("%w: %s", ErrStagedIsBooted, booted.Checksum)
	}
	return &staged[0], nil
}

// Pending returns the deployment the next boot starts when it is not the
// booted one: after finalization, the staged deployment became the
// default bootloader entry. It returns nil when the next boot is the
// booted deployment again (nothing was finalized).
func (s *Sysroot) Pending(booted *Deployment) (*Deployment, error) {
	ds, err := s.Deployments()
	if err != nil {
		return nil, err
	}
	entries, err := s.bootEntries()
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	d := byDir(ds, entries[0].deployment)
	if d == nil || (booted != nil && d.Dir == booted.Dir) {
		return nil, nil
	}
	return d, nil
}

package ostreevm

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// initramfsModules are the kernel modules the initramfs loads, with their
// dependencies (from modules.dep) first: the virtio PCI transport and block
// device, and ext4. crc32c is not a modules.dep dependency of ext4 (the
// kernel asks for it by crypto name at mount time, through a modprobe the
// initramfs does not have), so it is listed.
var initramfsModules = []string{"virtio_pci", "virtio_blk", "crc32c_generic", "ext4"}

// busyboxApplets are linked to busybox in the initramfs's /bin.
var busyboxApplets = []string{"sh", "mount", "insmod", "sleep", "mkdir", "cut", "switch_root", "poweroff", "cat"}

// prepareRoot is ostree-prepare-root in the guest root (ostree-boot).
const prepareRoot = "usr/lib/ostree/ostree-prepare-root"

// buildInitramfs writes an uncompressed newc cpio initramfs for kernel
// kver of the root filesystem root: busybox-static's /bin/busybox (from
// root), initScript as /init, the modules of initramfsModules in load order
// (listed in /modules.load), and ostree-prepare-root with the shared
// libraries it needs, found by reading ELF headers in root.
func buildInitramfs(root, kver string, initScript []byte, w io.Writer) error {
	c := newCpio(w)
	made := map[string]bool{}
	for _, d := range []string{"bin", "dev", "proc", "sys", "run", "sysroot", "lib", "lib/modules", "usr", "usr/lib", "usr/lib/ostree"} {
		made[d] = true
		c.dir(d, 0o755)
	}
	busybox, err := os.ReadFile(filepath.Join(root, "usr/bin/busybox"))
	if err != nil {
		return fmt.Errorf("busybox (package busybox-static): %w", err)
	}
	c.file("bin/busybox", 0o755, busybox)
	for _, a := range busyboxApplets {
		c.symlink("bin/"+a, "busybox")
	}
	c.file("init", 0o755, initScript)

	mods, err := moduleLoadOrder(filepath.Join(root, "usr/lib/modules", kver, "modules.dep"), initramfsModules)
	if err != nil {
		return err
	}
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(root, "usr/lib/modules", kver, m))
		if err != nil {
			return err
		}
		c.parents("lib/modules/"+m, made)
		c.file("lib/modules/"+m, 0o644, data)
	}
	c.file("modules.load", 0o644, []byte(strings.Join(mods, "\n")+"\n"))

	prep, err := os.ReadFile(filepath.Join(root, prepareRoot))
	if err != nil {
		return fmt.Errorf("ostree-prepare-root (package ostree-boot): %w", err)
	}
	c.file(prepareRoot, 0o755, prep)
	libs, err := elfClosure(root, "/"+prepareRoot)
	if err != nil {
		return err
	}
	for _, l := range libs {
		real, err := resolveIn(root, l)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(root, real))
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(l, "/")
		c.parents(rel, made)
		c.file(rel, 0o755, data)
	}
	return c.close()
}

// moduleLoadOrder returns the modules.dep paths of want and of everything
// they depend on, each dependency before its users. want names modules
// as modprobe does ("-" and "_" are the same).
func moduleLoadOrder(modulesDep string, want []string) ([]string, error) {
	f, err := os.Open(modulesDep)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	byName := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[moduleName(mod)] = mod
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var order []string
	seen := map[string]bool{}
	var visit func(string, int) error
	visit = func(mod string, depth int) error {
		if seen[mod] {
			return nil
		}
		if depth > 64 {
			return fmt.Errorf("%s: dependency loop at %s", modulesDep, mod)
		}
		if _, ok := deps[mod]; !ok {
			return fmt.Errorf("%s: no module %s", modulesDep, mod)
		}
		for _, d := range deps[mod] {
			if err := visit(d, depth+1); err != nil {
				return err
			}
		}
		seen[mod] = true
		order = append(order, mod)
		return nil
	}
	for _, w := range want {
		mod, ok := byName[strings.ReplaceAll(w, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("%s: no module %s (built in? then drop it from the list)", modulesDep, w)
		}
		if err := visit(mod, 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleName turns a modules.dep path (kernel/fs/ext4/ext4.ko, maybe
// compressed) into a module name with "_" for "-".
func moduleName(p string) string {
	b := path.Base(p)
	b, _, _ = strings.Cut(b, ".ko")
	return strings.ReplaceAll(b, "-", "_")
}

// libDirs are where the guest's dynamic linker finds libraries without an
// ld.so.cache (Debian multiarch, merged /usr).
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/lib"}

// elfClosure returns the absolute in-root paths the dynamic executable bin
// (absolute, in root) needs at run time: its interpreter and the closure
// of its DT_NEEDED libraries, sorted.
func elfClosure(root, bin string) ([]string, error) {
	need := map[string]bool{}
	var walk func(p string) error
	walk = func(p string) error {
		real, err := resolveIn(root, p)
		if err != nil {
			return err
		}
		f, err := elf.Open(filepath.Join(root, real))
		if err != nil {
			return err
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return err
			}
			need[string(bytes.TrimRight(b, "\x00"))] = true
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return err
		}
		for _, l := range libs {
			found := ""
			for _, d := range libDirs {
				if _, err := resolveIn(root, d+"/"+l); err == nil {
					found = d + "/" + l
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, not found in %v", p, l, libDirs)
			}
			if need[found] {
				continue
			}
			need[found] = true
			if err := walk(found); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(bin); err != nil {
		return nil, err
	}
	var out []string
	for p := range need {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// resolveIn resolves the absolute path p inside root, following symlinks
// (absolute targets relative to root), and returns the resolved absolute
// in-root path of an existing file.
func resolveIn(root, p string) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		next := path.Join(cur, parts[0])
		parts = parts[1:]
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", fmt.Errorf("resolving %s in %s: %w", p, root, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("resolving %s in %s: too many symlinks", p, root)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		parts = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), parts...)
		cur = "/"
	}
	return cur, nil
}

// cpioWriter writes a newc ("070701") cpio archive, the format the kernel
// unpacks as an initramfs. Entries are owned by root with mtime 0. The
// first error sticks and is returned by close.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	err error
}

func newCpio(w io.Writer) *cpioWriter { return &cpioWriter{w: w, ino: 1} }

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	_, c.err = c.w.Write(b.Bytes())
}

const (
	cpioDir  = 0o040000
	cpioReg  = 0o100000
	cpioLink = 0o120000
)

func (c *cpioWriter) dir(name string, perm uint32) { c.entry(name, cpioDir|perm, nil) }
func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.entry(name, cpioReg|perm, data)
}
func (c *cpioWriter) symlink(name, target string) { c.entry(name, cpioLink|0o777, []byte(target)) }

// parents writes the parent directories of rel not yet in made.
func (c *cpioWriter) parents(rel string, made map[string]bool) {
	var dirs []string
	for d := path.Dir(rel); d != "." && d != "/" && !made[d]; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		made[dirs[i]] = true
		c.dir(dirs[i], 0o755)
	}
}

func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}

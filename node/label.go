package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/manifest"
)

// xattrSELinux is the extended attribute that holds a file's SELinux
// context.
const xattrSELinux = "security.selinux"

// Labeler gives paths the SELinux context a deployment's policy assigns
// them, as libselinux's file_contexts backend (selabel_lookup) does: the
// policy's file_contexts, then file_contexts.homedirs and
// file_contexts.local; the last matching specification wins, those
// without regular expression characters before any other; a path is
// first translated through file_contexts.subs_dist and file_contexts.subs.
// A nil *Labeler labels nothing.
type Labeler struct {
	specs []labelSpec
	subs  [][2]string
}

type labelSpec struct {
	re      *regexp.Regexp
	typ     manifest.Type // "" matches any type
	context string        // "<<none>>" means do not label
	exact   bool          // no regular expression characters
	source  string
}

// LoadLabeler reads the SELinux policy of the tree root (a deployment):
// etc/selinux/config names the policy (SELINUXTYPE=, targeted by default)
// whose contexts/files/ are read. It returns nil, and no error, when the
// tree has no policy.
func LoadLabeler(root fstree.Tree) (*Labeler, error) {
	cfg, err := root.ReadFile("/etc/selinux/config")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	policy := "targeted"
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "SELINUXTYPE="); ok {
			policy = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	if policy == "" || strings.Contains(policy, "/") {
		return nil, fmt.Errorf("/etc/selinux/config: SELINUXTYPE=%q is not a policy name", policy)
	}
	dir := path.Join("/etc/selinux", policy, "contexts", "files")
	l := &Labeler{}
	found := false
	for _, name := range []string{"file_contexts", "file_contexts.homedirs", "file_contexts.local"} {
		b, err := root.ReadFile(path.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		if err := l.addSpecs(path.Join(dir, name), b); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, nil
	}
	for _, name := range []string{"file_contexts.subs_dist", "file_contexts.subs"} {
		b, err := root.ReadFile(path.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		l.addSubs(b)
	}
	l.sortSpecs()
	return l, nil
}

// fileTypes maps file_contexts' file type flags to entry types; the ones a
// MachineConfig cannot write match nothing mcbake labels.
var fileTypes = map[string]manifest.Type{
	"--": manifest.File, "-d": manifest.Directory, "-l": manifest.Symlink,
	"-c": manifest.Other, "-b": manifest.Other, "-s": manifest.Other, "-p": manifest.Other,
}

func (l *Labeler) addSpecs(file string, b []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		spec := labelSpec{source: file + ":" + strconv.Itoa(n)}
		switch len(f) {
		case 2:
			spec.context = f[1]
		case 3:
			t, ok := fileTypes[f[1]]
			if !ok {
				return fmt.Errorf("%s:%d: unknown file type %q", file, n, f[1])
			}
			spec.typ, spec.context = t, f[2]
		default:
			return fmt.Errorf("%s:%d: want REGEX [TYPE] CONTEXT", file, n)
		}
		re, err := regexp.Compile("^(?:" + f[0] + ")$")
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, n, err)
		}
		spec.re, spec.exact = re, !strings.ContainsAny(f[0], `.^$?*+|[({\`)
		l.specs = append(l.specs, spec)
	}
	return sc.Err()
}

func (l *Labeler) addSubs(b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			l.subs = append(l.subs, [2]string{path.Clean(f[0]), path.Clean(f[1])})
		}
	}
}

// sortSpecs moves the specifications without regular expression
// characters after the others, keeping the order within each group, as
// libselinux does: lookups go from the last one back, so these are tried
// first.
func (l *Labeler) sortSpecs() {
	var regex, exact []labelSpec
	for _, s := range l.specs {
		if s.exact {
			exact = append(exact, s)
		} else {
			regex = append(regex, s)
		}
	}
	l.specs = append(regex, exact...)
}

// Lookup returns the context for the path p of type t, "" when the policy
// says not to label it or nothing matches.
func (l *Labeler) Lookup(p string, t manifest.Type) string {
	if l == nil {
		return ""
	}
	p = l.substitute(path.Clean(p))
	for i := len(l.specs) - 1; i >= 0; i-- {
		s := l.specs[i]
		if (s.typ == "" || s.typ == t) && s.re.MatchString(p) {
			if s.context == "<<none>>" {
				return ""
			}
			return s.context
		}
	}
	return ""
}

// substitute applies the first substitution whose source is p or one of
// its parents.
func (l *Labeler) substitute(p string) string {
	for _, s := range l.subs {
		if p == s[0] || strings.HasPrefix(p, s[0]+"/") {
			return s[1] + p[len(s[0]):]
		}
	}
	return p
}

// setLabel sets the SELinux context of name in the directory dfd without
// following a final symlink; "" sets nothing.
func setLabel(dfd int, name, label string) error {
	if label == "" {
		return nil
	}
	p := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name
	return unix.Lsetxattr(p, xattrSELinux, append([]byte(label), 0), 0)
}

// setLabelFD sets the SELinux context of an open file; "" sets nothing.
func setLabelFD(fd int, label string) error {
	if label == "" {
		return nil
	}
	return unix.Fsetxattr(fd, xattrSELinux, append([]byte(label), 0), 0)
}

// getLabel returns the SELinux context of the directory name in dfd, ""
// when it has none (or the filesystem keeps none).
func getLabel(dfd int, name string) (string, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, xattrSELinux, buf)
		switch {
		case errors.Is(err, unix.ERANGE):
			buf = make([]byte, 2*len(buf))
			continue
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return "", nil
		case err != nil:
			return "", err
		}
		return strings.TrimSuffix(string(buf[:n]), "\x00"), nil
	}
}

// restoreLabel gives the directory name in dfd the context label back,
// or removes its context when label is "" (it had none).
func restoreLabel(dfd int, name, label string) error {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if label == "" {
		if err := unix.Fremovexattr(fd, xattrSELinux); err != nil && !errors.Is(err, unix.ENODATA) {
			return err
		}
		return nil
	}
	return setLabelFD(fd, label)
}

package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/mcbake/mcbake/fstree"
)

// idDB maps user or group names to ids, read from a root's passwd or group
// files: etc/ first, then usr/lib/ (nss-altfiles), the first entry wins.
type idDB struct {
	kind  string // "user" or "group"
	ids   map[string]int
	found bool // some source file existed
}

// loadIDs reads the root's etc/FILE and usr/lib/FILE; one that exists
// but cannot be read is an error.
func loadIDs(root fstree.Tree, kind, file string) (*idDB, error) {
	db := &idDB{kind: kind, ids: map[string]int{}}
	for _, dir := range []string{"/etc/", "/usr/lib/"} {
		b, err := root.ReadFile(dir + file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %ss: %w", kind, err)
		}
		db.found = true
		parseIDs(b, db.ids)
	}
	return db, nil
}

// parseIDs reads name:x:id:... lines; the first definition of a name wins.
func parseIDs(b []byte, into map[string]int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		id, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		if _, ok := into[f[0]]; !ok {
			into[f[0]] = id
		}
	}
}

// owners resolves user and group references, collecting unknown names so
// that all of them are reported together.
type owners struct {
	users, groups *idDB
	unknown       map[string][]string // "user core" -> fields that used it
}

func newOwners(root fstree.Tree) (*owners, error) {
	users, err := loadIDs(root, "user", "passwd")
	if err != nil {
		return nil, err
	}
	groups, err := loadIDs(root, "group", "group")
	if err != nil {
		return nil, err
	}
	return &owners{users: users, groups: groups, unknown: map[string][]string{}}, nil
}

func (o *owners) lookup(db *idDB, id *int, name *string, field string) int {
	if id != nil {
		return *id
	}
	if name == nil || *name == "" {
		return 0
	}
	if n, ok := db.ids[*name]; ok {
		return n
	}
	key := db.kind + " " + strconv.Quote(*name)
	o.unknown[key] = append(o.unknown[key], field)
	return 0
}

func (o *owners) uid(id *int, name *string, field string) int {
	return o.lookup(o.users, id, name, field+".user")
}

func (o *owners) gid(id *int, name *string, field string) int {
	return o.lookup(o.groups, id, name, field+".group")
}

// err reports every unknown name, one line each.
func (o *owners) err() error {
	if len(o.unknown) == 0 {
		return nil
	}
	keys := make([]string, 0, len(o.unknown))
	for k := range o.unknown {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		db, file := o.users, "passwd"
		if strings.HasPrefix(k, "group") {
			db, file = o.groups, "group"
		}
		why := fmt.Sprintf("not in etc/%s or usr/lib/%s of the root", file, file)
		if !db.found {
			why = fmt.Sprintf("no root with etc/%s or usr/lib/%s to resolve it", file, file)
		}
		for _, use := range o.unknown[k] {
			lines = append(lines, fmt.Sprintf("%s: unknown %s (%s)", use, k, why))
		}
	}
	return &UnknownOwnersError{Lines: lines}
}

// UnknownOwnersError lists every owner name that did not resolve, one line
// per use: FILE: MACHINECONFIG: FIELD: unknown user "NAME" (why).
type UnknownOwnersError struct{ Lines []string }

func (e *UnknownOwnersError) Error() string { return strings.Join(e.Lines, "\n") }

// Names returns the user (file "passwd") or group (file "group") names a
// root defines, read as the renderer reads them: etc/ then usr/lib/.
func Names(root fstree.Tree, file string) (map[string]bool, error) {
	kind := "user"
	if file == "group" {
		kind = "group"
	}
	db, err := loadIDs(root, kind, file)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range db.ids {
		names[n] = true
	}
	return names, nil
}

package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// presetDirs are searched for *.preset files; a file name in an earlier
// directory masks the same name in a later one (systemd.preset(5)).
var presetDirs = []string{
	"/etc/systemd/system-preset",
	"/run/systemd/system-preset",
	"/usr/local/lib/systemd/system-preset",
	"/usr/lib/systemd/system-preset",
	"/lib/systemd/system-preset",
}

type presetRule struct {
	enable  bool
	pattern string
}

// presets is the ordered rule list of a root's preset files.
type presets struct {
	rules []presetRule
}

// loadPresets reads root's preset files; a file that exists but cannot
// be read is an error.
func loadPresets(root Root) (*presets, error) {
	byName := map[string]string{}
	for _, dir := range presetDirs {
		names, err := root.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading presets: %w", err)
		}
		for _, name := range names {
			if !strings.HasSuffix(name, ".preset") {
				continue
			}
			if _, ok := byName[name]; !ok {
				byName[name] = path.Join(dir, name)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	p := &presets{}
	for _, n := range names {
		b, err := root.ReadFile(byName[n])
		if errors.Is(err, fs.ErrNotExist) {
			continue // a dangling symlink: systemd skips it too
		}
		if err != nil {
			return nil, fmt.Errorf("reading presets: %w", err)
		}
		p.rules = append(p.rules, parsePresetFile(b)...)
	}
	return p, nil
}

func parsePresetFile(b []byte) []presetRule {
	var rules []presetRule
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "enable":
			rules = append(rules, presetRule{enable: true, pattern: f[1]})
		case "disable":
			rules = append(rules, presetRule{enable: false, pattern: f[1]})
		}
	}
	return rules
}

// enabled reports what `systemctl preset` does with unit: the first
// matching rule decides; with no match systemd enables the unit.
func (p *presets) enabled(unit string) bool {
	for _, r := range p.rules {
		if ok, _ := path.Match(r.pattern, unit); ok {
			return r.enable
		}
	}
	return true
}

package lint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/internal/machineconfig"
)

// source is one MachineConfig file as read, kept for line numbers.
type source struct {
	name string // as machineconfig names it ("<stdin>" for standard input)
	data []byte
}

// loaded is what the MachineConfig files hold: the MachineConfigs that
// parsed (refusals or not, sorted by name) and every field error found.
type loaded struct {
	sources []source
	mcs     []*machineconfig.MachineConfig
	refused []*machineconfig.FieldError
}

// load reads the MachineConfigs as machineconfig.Load does (files,
// directories of *.yaml, *.yml, *.json, "-" for stdin) but keeps the
// MachineConfigs that have refusals, and returns the refusals instead of
// failing on them. Anything else wrong with the input (unreadable file,
// YAML syntax, duplicate names, nothing found) is an error.
func load(paths []string, stdin io.Reader) (*loaded, error) {
	files, err := expand(paths)
	if err != nil {
		return nil, err
	}
	l := &loaded{}
	var errs []error
	for _, f := range files {
		src, err := readSource(f, stdin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.sources = append(l.sources, src)
		mcs, err := machineconfig.Parse(src.name, src.data)
		l.mcs = append(l.mcs, mcs...)
		errs = append(errs, l.sortErrors(err)...)
	}
	errs = append(errs, duplicateNames(l.mcs)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(l.mcs) == 0 && len(l.refused) == 0 {
		return nil, fmt.Errorf("no MachineConfig found in %s", strings.Join(paths, ", "))
	}
	sort.SliceStable(l.mcs, func(i, j int) bool { return l.mcs[i].Name < l.mcs[j].Name })
	return l, nil
}

// sortErrors keeps the field errors in err as refusals and returns the
// others.
func (l *loaded) sortErrors(err error) []error {
	var others []error
	for _, e := range leaves(err) {
		var fe *machineconfig.FieldError
		if errors.As(e, &fe) {
			l.refused = append(l.refused, fe)
			continue
		}
		others = append(others, e)
	}
	return others
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

func expand(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, errors.New("no MachineConfig given (use -f FILE, a directory, or - for stdin)")
	}
	var files []string
	for _, p := range paths {
		if p == machineconfig.Stdin {
			files = append(files, p)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		found, err := configFiles(p)
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	return files, nil
}

// configFiles lists a directory's *.yaml, *.yml and *.json files, sorted.
func configFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json file in directory", dir)
	}
	return files, nil
}

func readSource(name string, stdin io.Reader) (source, error) {
	if name != machineconfig.Stdin {
		b, err := os.ReadFile(name)
		return source{name: name, data: b}, err
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return source{}, fmt.Errorf("reading stdin: %w", err)
	}
	return source{name: "<stdin>", data: b}, nil
}

func duplicateNames(mcs []*machineconfig.MachineConfig) []error {
	seen := map[string]string{}
	var errs []error
	for _, mc := range mcs {
		if prev, ok := seen[mc.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: %s: metadata.name: MachineConfig name already defined in %s", mc.File, mc.Name, prev))
			continue
		}
		seen[mc.Name] = mc.File
	}
	return errs
}

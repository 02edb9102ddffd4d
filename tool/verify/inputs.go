package verify

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
)

// loaded is what the MachineConfig files hold: the MachineConfigs that
// parsed (refusals or not, sorted by name) and every field error found.
type loaded struct {
	sources []machineconfig.Input
	mcs     []*machineconfig.MachineConfig
	refused []*machineconfig.FieldError
}

// load reads the MachineConfigs as machineconfig.Load does (files,
// directories of *.yaml, *.yml, *.json, *.bu, "-" for stdin) for pool (see
// machineconfig.ForPool) but keeps the MachineConfigs that have
// refusals, and returns the refusals (those of machineconfig.CheckMerge
// too) instead of failing on them. Anything else wrong with the input
// (unreadable file, YAML syntax, duplicate names, roles no pool merges
// when none is given, nothing found) is an error; with a pool given,
// MachineConfigs it does not merge are refusals (MCB001). Objects of other
// kinds in a directory's files are skipped (skipped is told of them).
func load(paths []string, stdin io.Reader, pool string, skipped func(*machineconfig.FieldError)) (*loaded, error) {
	srcs, err := machineconfig.ReadInputs(paths, stdin)
	if err != nil {
		return nil, err
	}
	l := &loaded{sources: srcs}
	var errs []error
	for _, src := range srcs {
		mcs, err := machineconfig.Parse(src.Name, src.Data)
		if src.InDirectory {
			err = machineconfig.SkipOtherKinds(err, skipped)
		}
		l.mcs = append(l.mcs, mcs...)
		errs = append(errs, l.sortErrors(err)...)
	}
	if err := machineconfig.CheckDuplicateNames(l.mcs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(l.mcs) == 0 && len(l.refused) == 0 {
		return nil, fmt.Errorf("no MachineConfig found in %s", strings.Join(paths, ", "))
	}
	mcs, err := machineconfig.ForPool(l.mcs, pool)
	if errs := l.sortErrors(err); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if mcs != nil {
		l.mcs = mcs
	}
	if err := errors.Join(l.sortErrors(machineconfig.CheckMerge(l.mcs))...); err != nil {
		return nil, err
	}
	sort.SliceStable(l.mcs, func(i, j int) bool { return l.mcs[i].Name < l.mcs[j].Name })
	return l, nil
}

// sortErrors keeps the field errors in err as refusals and returns the
// others.
func (l *loaded) sortErrors(err error) []error {
	var others []error
	for _, e := range machineconfig.Errors(err) {
		var fe *machineconfig.FieldError
		if errors.As(e, &fe) {
			l.refused = append(l.refused, fe)
			continue
		}
		others = append(others, e)
	}
	return others
}

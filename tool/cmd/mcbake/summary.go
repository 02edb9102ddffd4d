package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/mcbake/mcbake/manifest"
)

// printSummary prints a short account of a manifest: counts by type and
// by MachineConfig.
func printSummary(w io.Writer, where string, m *manifest.Manifest) error {
	byType := map[manifest.Type]int{}
	byMC := map[string]int{}
	for _, e := range m.Entries {
		byType[e.Type]++
		byMC[e.Source.MachineConfig]++
	}
	fmt.Fprintf(w, "%s: %d owned paths from %d MachineConfig(s)\n", where, len(m.Entries), len(m.MachineConfigs))
	for _, t := range []manifest.Type{manifest.File, manifest.Directory, manifest.Symlink, manifest.Hardlink, manifest.Absent} {
		if byType[t] > 0 {
			fmt.Fprintf(w, "  %-10s %d\n", t, byType[t])
		}
	}
	names := make([]string, 0, len(byMC))
	for n := range byMC {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  from %s: %d\n", n, byMC[n])
	}
	states := map[string]int{}
	for _, u := range m.Units {
		states[u.Enablement]++
	}
	if len(m.Units) > 0 {
		fmt.Fprintf(w, "  units: %d (enabled %d, disabled %d, masked %d, preset %d)\n", len(m.Units),
			states["enabled"], states["disabled"], states["masked"], states["preset"])
	}
	return nil
}

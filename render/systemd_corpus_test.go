package render

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

var (
	corpusSeed = flag.Uint64("systemd.seed", 252, "seed of the generated systemd differential corpus")
	corpusSize = flag.Int("systemd.cases", 300, "number of generated systemd differential cases")
)

// TestSystemdCorpus checks a generated corpus the same way as the
// hand-written cases: random unit graphs (plain units, templates,
// instances, aliases, Also= chains, drop-ins with [Install], masks, base
// links absolute, relative and dangling, preset files with globs,
// instance lists and unknown lines), each rendered and replayed with the
// real systemctl. The seed is fixed (-systemd.seed, -systemd.cases to
// explore further); a failing case logs its MachineConfig and base.
func TestSystemdCorpus(t *testing.T) {
	rp := needSystemctl(t)
	var ok, refused atomic.Int64
	t.Run("cases", func(t *testing.T) {
		for i := range *corpusSize {
			c := generateCase(*corpusSeed, uint64(i))
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				mcbake, mcd := runCase(t, rp, c)
				compare(t, c, mcbake, mcd)
				if mcd.err == nil {
					ok.Add(1)
				} else {
					refused.Add(1)
				}
			})
		}
	})
	t.Logf("%d generated cases (seed %d): %d rendered as the MCD writes them, %d refused as the MCD fails", *corpusSize, *corpusSeed, ok.Load(), refused.Load())
}

// gen draws one case's pieces.
type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g gen) chance(p float64) bool    { return g.r.Float64() < p }

var (
	genPlain     = []string{"a.service", "b.service", "c.service", "d.service", "e.service"}
	genTemplates = []string{"t@.service", "u@.service"}
	genInstances = []string{"t@x.service", "t@y.service", "u@x.service"}
	genTargets   = []string{"multi-user.target", "x.target", "y.target", "tt@.target", "tt@x.target", "sockets.target"}
)

// install returns a random [Install] section for the unit name.
func (g gen) install(name string) string {
	var lines []string
	tmpl := strings.Contains(name, "@.")
	inst := strings.Contains(name, "@") && !tmpl
	for range g.r.IntN(3) {
		target := g.pick(genTargets...)
		switch {
		case inst && g.chance(0.3):
			target = g.pick("%i.target", "tt@%i.target", "%p.target")
		case g.chance(0.1):
			target = g.pick("%N.target", "%j.target", "%n.target")
		}
		key := "WantedBy"
		if g.chance(0.25) {
			key = "RequiredBy"
		}
		lines = append(lines, key+"="+target)
	}
	if g.chance(0.1) {
		lines = append(lines, g.pick("WantedBy=", "RequiredBy="))
	}
	if g.chance(0.35) {
		switch {
		case tmpl:
			lines = append(lines, "Alias="+g.pick("alt@.service", "t@.service", "alt.service"))
		case inst:
			lines = append(lines, "Alias="+g.pick("alt@.service", "alt@%i.service", "alt@z.service"))
		default:
			lines = append(lines, "Alias="+g.pick("al1.service", "al2.service", "a.service", "al.socket", "%p-al.service"))
		}
	}
	for range g.r.IntN(3) / 2 * (1 + g.r.IntN(2)) {
		lines = append(lines, "Also="+g.pick(append(append(append([]string{}, genPlain...), genInstances...), "t@.service", "missing.service")...))
	}
	if tmpl && g.chance(0.5) {
		lines = append(lines, "DefaultInstance="+g.pick("x", "y", "%p"))
	}
	if g.chance(0.03) {
		lines = append(lines, "WantedBy=%I.target")
	}
	if len(lines) == 0 && g.chance(0.5) {
		return ""
	}
	return "[Install]\n" + strings.Join(lines, "\n") + "\n"
}

func (g gen) unitFile(name string) string {
	if strings.HasSuffix(name, ".socket") {
		return "[Socket]\nListenStream=/run/" + name + "\n" + g.install(name)
	}
	return "[Unit]\nDescription=" + name + "\n[Service]\nExecStart=/bin/true\n" + g.install(name)
}

// base returns a random base tree.
func (g gen) base() map[string]string {
	b := map[string]string{}
	names := append(append(append([]string{}, genPlain...), genTemplates...), genInstances...)
	for _, n := range names {
		inst := strings.Contains(n, "@") && !strings.Contains(n, "@.")
		switch {
		case inst && !g.chance(0.15), !inst && !g.chance(0.6):
		case g.chance(0.8):
			b[usrlib+n] = g.unitFile(n)
		default:
			b[etc+n] = g.unitFile(n)
		}
	}
	for range g.r.IntN(4) {
		n := g.pick(append(append([]string{}, genPlain...), genInstances...)...)
		dir := etc + g.pick(genTargets[:3]...) + g.pick(".wants/", ".wants/", ".requires/")
		tmpl := n
		if strings.Contains(n, "@") {
			tmpl = n[:strings.Index(n, "@")+1] + ".service"
		}
		b[dir+n] = "-> " + g.pick("/usr/lib/systemd/system/"+tmpl, "../../../../usr/lib/systemd/system/"+tmpl, "/etc/systemd/system/"+tmpl, "/usr/lib/systemd/system/gone.service")
	}
	if g.chance(0.3) {
		b[etc+g.pick("al1.service", "al2.service")] = "-> /usr/lib/systemd/system/" + g.pick(genPlain...)
	}
	if g.chance(0.15) {
		// A link to an alias: disable follows it.
		b[etc+g.pick(genTargets[:3]...)+".wants/"+g.pick("al1.service", "al2.service")] = "-> /etc/systemd/system/" + g.pick("al1.service", "al2.service")
	}
	if g.chance(0.25) {
		b[etc+g.pick(genPlain...)] = "-> /dev/null"
	}
	if g.chance(0.3) {
		n := g.pick(append(append([]string{}, genPlain...), genTemplates...)...)
		b[g.pick(etc, usrlib)+n+".d/10-base.conf"] = g.install(n)
	}
	if g.chance(0.1) {
		b["opt/lnk.service"] = g.unitFile("lnk.service")
		b[etc+"lnk.service"] = "-> /opt/lnk.service"
	}
	if g.chance(0.1) {
		b[etc+"t@.service.d/20-tmpl.conf"] = g.install("t@.service")
	}
	if g.chance(0.7) {
		b[preset+"80-gen.preset"] = g.presets()
	}
	if g.chance(0.05) {
		b["etc/systemd/system-preset/80-gen.preset"] = "-> /dev/null"
	}
	if g.chance(0.2) {
		b["etc/systemd/system-preset/"+g.pick("80-gen.preset", "10-etc.preset")] = g.presets()
	}
	return b
}

func (g gen) presets() string {
	var lines []string
	for range 1 + g.r.IntN(4) {
		lines = append(lines, g.pick("enable a.service", "disable b.service", "enable [a-c].service", "disable *", "enable *",
			"enable t@.service x y", "enable u@.service x", "disable t@*", "ignore c.service", "# comment", "enable t@x.service",
			"disable d.service e.service", "enable ?.service"))
	}
	return strings.Join(lines, "\n") + "\n"
}

// units returns the MachineConfig's units.
func (g gen) units() ([]types.Unit, map[string]string) {
	pool := append(append(append([]string{}, genPlain...), genTemplates...), genInstances...)
	seen := map[string]bool{}
	var out []types.Unit
	files := map[string]string{}
	for range 1 + g.r.IntN(5) {
		n := g.pick(pool...)
		switch x := g.r.Float64(); {
		case x < 0.15:
			n = g.pick(genTemplates...) // presets may list its instances
		case x < 0.22:
			n = g.pick("al1.service", "al2.service", "lnk.service", "s.socket")
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		u := types.Unit{Name: n}
		if g.chance(0.5) {
			u.Contents = ptr(g.unitFile(n))
		}
		switch g.r.IntN(3) {
		case 0:
			u.Enabled = on
		case 1:
			u.Enabled = off
		}
		switch x := g.r.Float64(); {
		case x < 0.12:
			u.Mask = on
		case x < 0.24:
			u.Mask = off
		}
		if g.chance(0.3) {
			u.Dropins = append(u.Dropins, dropin("50-mc.conf", "[Service]\nEnvironment=A=1\n"+g.install(n)))
		}
		if g.chance(0.08) {
			u.Dropins = append(u.Dropins, types.Dropin{Name: "10-base.conf", Contents: ptr("")})
		}
		if u.Contents == nil && g.chance(0.1) {
			files["/etc/systemd/system/"+n] = g.unitFile(n)
		}
		out = append(out, u)
	}
	return out, files
}

func generateCase(seed, i uint64) sdCase {
	g := gen{rand.New(rand.NewPCG(seed, i))}
	c := sdCase{base: g.base()}
	c.units, c.files = g.units()
	var names []string
	for _, u := range c.units {
		names = append(names, u.Name)
	}
	sort.Strings(names)
	c.name = fmt.Sprintf("%03d-%s", i, strings.Join(names, ","))
	return c
}

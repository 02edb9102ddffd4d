package render

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// TestSystemdSpecifiers: systemd 252 resolves %i %j %n %N %p, the
// os-release specifiers and %u %U %g %G in [Install]; %I %P %J %f are not
// install specifiers there (systemctl fails); %H %m %b %v %a %l %q are the
// node's, which an image cannot know.
func TestSystemdSpecifiers(t *testing.T) {
	osRelease := map[string]string{"etc/os-release": "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=rhcos\nVERSION_ID=\"4.18\"\nVARIANT_ID=coreos\n"}
	withBase := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range osRelease {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	runCases(t, []sdCase{{
		name: "instance file: %i %p %j %N %n",
		base: withBase(nil),
		units: []types.Unit{unit("sp-x@a-b.service", on, svc(
			"WantedBy=%i.target %p.target %j.target", "RequiredBy=%N.target", "Alias=sp-alias@%i.service", "Also=other@%i.service"))},
		want: "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			for _, p := range []string{"/a-b.target.wants/sp-x@a-b.service", "/sp-x.target.wants/sp-x@a-b.service", "/x.target.wants/sp-x@a-b.service",
				"/sp-x@a-b.target.requires/sp-x@a-b.service", "/sp-alias@a-b.service"} {
				has(t, tree, p, "/etc/systemd/system/sp-x@a-b.service")
			}
		},
	}, {
		name: "template with DefaultInstance=: %i %n %N are the default instance's",
		base: withBase(nil),
		units: []types.Unit{unit("tpl@.service", on, svc(
			"DefaultInstance=def", "WantedBy=%i.target %n.target multi-user.target", "RequiredBy=%N.target", "Alias=%p-alias@.service"))},
		want: "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			for _, p := range []string{"/def.target.wants/tpl@def.service", "/tpl@def.service.target.wants/tpl@def.service",
				"/multi-user.target.wants/tpl@def.service", "/tpl@def.target.requires/tpl@def.service", "/tpl-alias@.service"} {
				has(t, tree, p, "/etc/systemd/system/tpl@.service")
			}
		},
	}, {
		name:  "DefaultInstance= with a specifier",
		base:  withBase(nil),
		units: []types.Unit{unit("di@.service", on, svc("DefaultInstance=%p", "WantedBy=multi-user.target"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/di@di.service", "/etc/systemd/system/di@.service")
		},
	}, {
		name:  "os-release and user specifiers, %%",
		base:  withBase(nil),
		units: []types.Unit{unit("osr.service", on, svc("WantedBy=%o-%w.target %W.target %u-%U.target %g-%G.target"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			for _, p := range []string{"/rhcos-4.18.target.wants/osr.service", "/coreos.target.wants/osr.service", "/root-0.target.wants/osr.service"} {
				has(t, tree, p, "/etc/systemd/system/osr.service")
			}
		},
	}, {
		name:  "%% is a percent sign, which no unit name has",
		base:  withBase(nil),
		units: []types.Unit{unit("pct.service", on, svc("WantedBy=pct%%.target"))},
		want:  "refused", wantErr: `"pct%.target" is not a valid unit name`,
	}, {
		// config_parse_strv keeps the empty word '' makes (found by
		// FuzzInstall): systemctl links the other word, then refuses.
		name:  "an empty quoted word is an invalid unit name",
		base:  withBase(nil),
		units: []types.Unit{unit("empty-word.service", on, svc("WantedBy='' multi-user.target"))},
		want:  "refused", wantErr: `"" is not a valid unit name`,
	}, {
		name:  "an empty specifier vanishes",
		base:  withBase(nil),
		units: []types.Unit{unit("empty-spec.service", on, svc("WantedBy=x%B.target"))},
		want:  "ok",
	}, {
		name:  "Also= with a specifier",
		base:  withBase(map[string]string{usrlib + "helper-also-spec.service": svc("WantedBy=multi-user.target")}),
		units: []types.Unit{unit("also-spec.service", on, svc("Also=helper-%p.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/helper-also-spec.service", "/usr/lib/systemd/system/helper-also-spec.service")
		},
	}, {
		name: "%I is not an install specifier", base: withBase(nil),
		units: []types.Unit{unit("si@a.service", on, svc("WantedBy=%I.target"))},
		want:  "refused", wantErr: "spec.config.systemd.units[si@a.service].enabled: systemctl enable si@a.service: failed to enable unit, invalid specifier",
	}, {
		name: "%P in Alias=", base: withBase(nil),
		units: []types.Unit{unit("sp.service", on, svc("Alias=%P-x.service"))},
		want:  "refused",
	}, {
		name: "%J in RequiredBy=", base: withBase(nil),
		units: []types.Unit{unit("sj.service", on, svc("RequiredBy=%J.target"))},
		want:  "refused",
	}, {
		name: "%f in Also= fails to parse", base: withBase(nil),
		units: []types.Unit{unit("sf.service", on, svc("WantedBy=multi-user.target", "Also=%f.service"))},
		want:  "refused",
	}, {
		name: "%H is the node's hostname", base: withBase(nil),
		units: []types.Unit{unit("sh.service", on, svc("WantedBy=%H.target"))},
		want:  "node", wantErr: "spec.config.systemd.units[sh.service].contents: unit sh.service: [Install] of sh.service uses %H",
	}, {
		name: "%m is the node's machine ID", base: withBase(nil),
		units: []types.Unit{unit("sm.service", on, svc("Alias=m-%m.service"))},
		want:  "node",
	}, {
		name: "%v in a preset unit is refused too", base: withBase(nil),
		units: []types.Unit{unit("sv.service", nil, svc("WantedBy=k%v.target"))},
		want:  "node",
	}})
}

// TestSystemdInstancesAndTemplates: instances get their own alias; a
// template without DefaultInstance= makes template-to-template links and
// its alias, and cannot be wanted by a non-template unit.
func TestSystemdInstancesAndTemplates(t *testing.T) {
	tmpl := map[string]string{usrlib + "inst@.service": svc("WantedBy=multi-user.target", "Alias=inst-alias@.service")}
	runCases(t, []sdCase{{
		name:  "an instance enabled through Also= gets the instance's alias",
		base:  tmpl,
		units: []types.Unit{unit("starter.service", on, svc("Also=inst@x.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/inst-alias@x.service", "/usr/lib/systemd/system/inst@.service")
			has(t, tree, "/multi-user.target.wants/inst@x.service", "/usr/lib/systemd/system/inst@.service")
			lacks(t, tree, "/inst-alias@.service")
		},
	}, {
		name:  "a preset instance gets the instance's alias",
		base:  tmpl,
		units: []types.Unit{unit("inst@y.service", nil, "", dropin("10-x.conf", "[Service]\nEnvironment=X=1\n"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/inst-alias@y.service", "/usr/lib/systemd/system/inst@.service")
		},
	}, {
		name:  "an instance file with contents",
		base:  tmpl,
		units: []types.Unit{unit("inst@z.service", on, svc("WantedBy=multi-user.target", "Alias=inst-alias@.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/inst-alias@z.service", "/etc/systemd/system/inst@z.service")
		},
	}, {
		name:  "enabled: true on an instance without contents is skipped by the MCD (no unit file by that name)",
		base:  tmpl,
		units: []types.Unit{unit("inst@w.service", on, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/multi-user.target.wants/inst@w.service") },
	}, {
		name:  "a template without DefaultInstance=: template-to-template links and its alias",
		units: []types.Unit{unit("tt@.service", on, svc("WantedBy=foo@.target", "RequiredBy=bar@x.target", "Alias=tt-alias@.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/foo@.target.wants/tt@.service", "/etc/systemd/system/tt@.service")
			has(t, tree, "/bar@x.target.requires/tt@.service", "/etc/systemd/system/tt@.service")
			has(t, tree, "/tt-alias@.service", "/etc/systemd/system/tt@.service")
		},
	}, {
		name:  "a template without DefaultInstance= wanted by a non-template target",
		units: []types.Unit{unit("nt@.service", on, svc("WantedBy=multi-user.target"))},
		want:  "refused", wantErr: "failed to enable nt@.service, destination unit multi-user.target is a non-template unit",
	}, {
		name:  "the same template under preset: the wants are skipped, the alias made",
		units: []types.Unit{unit("pt@.service", nil, svc("WantedBy=multi-user.target", "Alias=pt-alias@.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/multi-user.target.wants/pt@.service")
			has(t, tree, "/pt-alias@.service", "/etc/systemd/system/pt@.service")
		},
	}, {
		name:  "an instance of a template with DefaultInstance= ignores it",
		base:  map[string]string{usrlib + "dd@.service": svc("DefaultInstance=def", "WantedBy=multi-user.target")},
		units: []types.Unit{unit("starter2.service", on, svc("Also=dd@other.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/dd@other.service", "")
			lacks(t, tree, "/multi-user.target.wants/dd@def.service")
		},
	}, {
		name:  "DefaultInstance= that is not a valid instance fails to parse",
		units: []types.Unit{unit("bad-di@.service", on, svc("DefaultInstance=a/b", "WantedBy=multi-user.target"))},
		want:  "refused",
	}})
}

// TestSystemdDropins: systemctl reads [Install] from drop-ins (the
// unit's and, for an instance, its template's); an empty assignment
// resets a list.
func TestSystemdDropins(t *testing.T) {
	runCases(t, []sdCase{{
		name:  "a drop-in's [Install] enables a base unit without one",
		base:  map[string]string{usrlib + "crio.service": svc()},
		units: []types.Unit{unit("crio.service", on, "", dropin("50-install.conf", "[Install]\nWantedBy=multi-user.target\nAlias=cri-o.service\n"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/crio.service", "/usr/lib/systemd/system/crio.service")
			has(t, tree, "/cri-o.service", "/usr/lib/systemd/system/crio.service")
		},
	}, {
		name:  "WantedBy= in a drop-in resets the unit's list",
		base:  map[string]string{usrlib + "reset.service": svc("WantedBy=a.target")},
		units: []types.Unit{unit("reset.service", on, "", dropin("50-reset.conf", "[Install]\nWantedBy=\nWantedBy=b.target\n"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/a.target.wants/reset.service")
			has(t, tree, "/b.target.wants/reset.service", "")
		},
	}, {
		name:  "the template's drop-in applies to an instance",
		base:  map[string]string{usrlib + "dt@.service": svc(), etc + "dt@.service.d/install.conf": "[Install]\nWantedBy=multi-user.target\n"},
		units: []types.Unit{unit("dt-start.service", on, svc("Also=dt@one.service"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/dt@one.service", "/usr/lib/systemd/system/dt@.service")
		},
	}, {
		name:  "a drop-in in /usr/lib and one in /etc with the same name: /etc wins",
		base:  map[string]string{usrlib + "dd.service": svc(), usrlib + "dd.service.d/x.conf": "[Install]\nWantedBy=a.target\n"},
		units: []types.Unit{unit("dd.service", on, "", dropin("x.conf", "[Install]\nWantedBy=b.target\n"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/a.target.wants/dd.service")
			has(t, tree, "/b.target.wants/dd.service", "")
		},
	}, {
		name:  "an empty drop-in is removed, and its [Install] with it",
		base:  map[string]string{usrlib + "gone.service": svc(), etc + "gone.service.d/x.conf": "[Install]\nWantedBy=a.target\n"},
		units: []types.Unit{unit("gone.service", on, "", types.Dropin{Name: "x.conf", Contents: ptr("")})},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/a.target.wants/gone.service") },
	}})
}

// TestSystemdPresets: preset rules listing instances, globs, the first
// file and first rule winning, lines systemd 252 does not know
// ("ignore"), and a preset after the unit's own file is written.
func TestSystemdPresets(t *testing.T) {
	base := map[string]string{
		usrlib + "pi@.service": svc("WantedBy=multi-user.target"),
		preset + "80-test.preset": "# rules\nenable pi@.service a b\nignore ign.service\n" +
			"disable dis-*.service\nenable dis-on.service\ndisable ign.service\nenable en.service\ndisable more words.service\n",
		preset + "90-default.preset":               "enable *\n",
		"etc/systemd/system-preset/80-test.preset": "enable pi@.service a b\nignore ign.service\ndisable dis-*\ndisable ign.service\ndisable more words.service\n",
	}
	units := func(us ...types.Unit) []types.Unit { return us }
	runCases(t, []sdCase{{
		name:  "a template listed with instances enables those instances",
		base:  base,
		units: units(unit("pi@.service", nil, "", dropin("10-x.conf", "[Service]\n"))),
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/pi@a.service", "/usr/lib/systemd/system/pi@.service")
			has(t, tree, "/multi-user.target.wants/pi@b.service", "/usr/lib/systemd/system/pi@.service")
		},
	}, {
		name:  "a listed instance is enabled, an unlisted one falls through to the next rule",
		base:  base,
		units: units(unit("pi@a.service", nil, "", dropin("10-x.conf", "[Service]\n")), unit("pi@c.service", nil, "", dropin("10-x.conf", "[Service]\n"))),
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/pi@a.service", "")
			has(t, tree, "/multi-user.target.wants/pi@c.service", "")
		},
	}, {
		name:  "ignore is no rule in systemd 252: the next rule decides",
		base:  base,
		units: units(unit("ign.service", nil, svc("WantedBy=multi-user.target"))),
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/multi-user.target.wants/ign.service") },
	}, {
		name: "/etc's file masks /usr/lib's; globs; no rule enables",
		base: base,
		units: units(unit("dis-on.service", nil, svc("WantedBy=multi-user.target")), unit("en.service", nil, svc("WantedBy=multi-user.target")),
			unit("more.service", nil, svc("WantedBy=multi-user.target"))),
		want: "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/multi-user.target.wants/dis-on.service")
			has(t, tree, "/multi-user.target.wants/en.service", "")
			has(t, tree, "/multi-user.target.wants/more.service", "")
		},
	}, {
		name:  "a disabling preset removes the base's links",
		base:  map[string]string{usrlib + "po.service": svc("WantedBy=multi-user.target"), etc + "multi-user.target.wants/po.service": "-> /usr/lib/systemd/system/po.service", preset + "10.preset": "disable po.service\n"},
		units: units(unit("po.service", nil, "", dropin("10-x.conf", "[Service]\n"))),
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/multi-user.target.wants/po.service") },
	}, {
		name:  "a failing preset is ignored by the MCD, with what it did before failing",
		base:  map[string]string{usrlib + "pf.service": svc("WantedBy=multi-user.target", "Alias=taken.service"), etc + "taken.service": "-> /usr/lib/systemd/system/other.service", usrlib + "other.service": svc()},
		units: units(unit("pf.service", nil, "", dropin("10-x.conf", "[Service]\n"))),
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/pf.service", "")
			has(t, tree, "/taken.service", "/usr/lib/systemd/system/other.service")
		},
	}, {
		name:  "a preset of a unit that exists nowhere does nothing",
		units: units(unit("nowhere.service", nil, "", dropin("10-x.conf", "[Service]\n"))),
		want:  "ok",
	}})
}

// TestSystemdOrder: the MCD's order of operations — drop-ins, mask,
// disable-if-enabled before the rewrite, unmask, preset, per unit; then
// one enable batch, then one disable batch.
func TestSystemdOrder(t *testing.T) {
	runCases(t, []sdCase{{
		name: "a rewritten unit is disabled first (OCPBUGS-33694)",
		base: map[string]string{usrlib + "rw.service": svc("WantedBy=old.target", "Alias=rw-old.service"),
			etc + "old.target.wants/rw.service": "-> /usr/lib/systemd/system/rw.service", etc + "rw-old.service": "-> /usr/lib/systemd/system/rw.service"},
		units: []types.Unit{unit("rw.service", on, svc("WantedBy=new.target"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/old.target.wants/rw.service")
			lacks(t, tree, "/old.target.wants") // mcbake keeps it, empty
			lacks(t, tree, "/rw-old.service")
			has(t, tree, "/new.target.wants/rw.service", "/etc/systemd/system/rw.service")
		},
	}, {
		name:  "a unit linked from a .wants directory is enabled without [Install], so the rewrite disables it",
		base:  map[string]string{usrlib + "st.service": svc(), etc + "x.target.wants/st.service": "-> /usr/lib/systemd/system/st.service"},
		units: []types.Unit{unit("st.service", nil, svc())},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/x.target.wants/st.service") },
	}, {
		name: "a static unit (linked from /usr/lib) is rewritten without disabling",
		base: map[string]string{usrlib + "st2.service": svc(), usrlib + "x.target.wants/st2.service": "-> ../st2.service",
			etc + "y.target.wants/other.service": "-> /usr/lib/systemd/system/st2.service"},
		units: []types.Unit{unit("st2.service", nil, svc())},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { has(t, tree, "/y.target.wants/other.service", "") },
	}, {
		name: "disable removes the links the enable batch made through Also=",
		units: []types.Unit{unit("a.service", on, svc("WantedBy=multi-user.target", "Also=b.service")),
			unit("b.service", off, svc("WantedBy=multi-user.target", "Alias=b-alias.service"))},
		want: "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/a.service", "")
			lacks(t, tree, "/multi-user.target.wants/b.service")
			lacks(t, tree, "/b-alias.service")
		},
	}, {
		name: "disabling a unit disables its Also= units, after the enable batch",
		units: []types.Unit{unit("c.service", off, svc("WantedBy=multi-user.target", "Also=d.service")),
			unit("d.service", on, svc("WantedBy=multi-user.target"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/multi-user.target.wants/d.service") },
	}, {
		name: "a later unit's preset sees an earlier unit's file",
		units: []types.Unit{unit("early.service", nil, svc("WantedBy=multi-user.target")),
			unit("late.service", nil, svc("Also=early.service"))},
		want: "ok",
	}, {
		name:  "a unit file given as a storage file is enabled from there",
		files: map[string]string{"/etc/systemd/system/sf.service": svc("WantedBy=multi-user.target")},
		units: []types.Unit{unit("sf.service", on, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/sf.service", "/etc/systemd/system/sf.service")
		},
	}, {
		name:  "a disabled unit's emptied .wants directory goes",
		base:  map[string]string{usrlib + "only.service": svc("WantedBy=lonely.target"), etc + "lonely.target.wants/only.service": "-> /usr/lib/systemd/system/only.service"},
		units: []types.Unit{unit("only.service", off, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/lonely.target.wants") },
	}, {
		name: "disable removes symlinks to a removed alias, and links by any name",
		base: map[string]string{usrlib + "al.service": svc("WantedBy=multi-user.target", "Alias=al2.service"),
			etc + "al2.service":                         "-> /usr/lib/systemd/system/al.service",
			etc + "multi-user.target.wants/al.service":  "-> /usr/lib/systemd/system/al.service",
			etc + "other.target.wants/al.service":       "-> /usr/lib/systemd/system/al.service",
			etc + "other.target.wants/whatever.service": "-> /usr/lib/systemd/system/al.service"},
		units: []types.Unit{unit("al.service", off, "")},
		want:  "ok",
	}, {
		name: "a link to an alias goes with the alias",
		base: map[string]string{usrlib + "ch.service": svc("WantedBy=multi-user.target"),
			etc + "aa-alias.service":                         "-> /usr/lib/systemd/system/ch.service",
			etc + "multi-user.target.wants/aa-alias.service": "-> /etc/systemd/system/aa-alias.service"},
		units: []types.Unit{unit("ch.service", off, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/multi-user.target.wants/aa-alias.service")
		},
	}})
}

// TestSystemdBaseLinks: links the base has are left as they are when
// systemctl finds them equivalent (relative targets included).
func TestSystemdBaseLinks(t *testing.T) {
	runCases(t, []sdCase{{
		name: "a relative base link is kept",
		base: map[string]string{usrlib + "rel.service": svc("WantedBy=multi-user.target", "Alias=rel-alias.service"),
			etc + "multi-user.target.wants/rel.service": "-> ../../../../usr/lib/systemd/system/rel.service",
			etc + "rel-alias.service":                   "-> ../../../usr/lib/systemd/system/rel.service"},
		units: []types.Unit{unit("rel.service", on, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/rel.service", "../../../../usr/lib/systemd/system/rel.service")
		},
	}, {
		name: "a base link to the same name elsewhere in the search path is kept",
		base: map[string]string{usrlib + "el.service": svc("WantedBy=multi-user.target"),
			etc + "multi-user.target.wants/el.service": "-> /etc/systemd/system/el.service"},
		units: []types.Unit{unit("el.service", on, "")},
		want:  "ok",
	}, {
		name: "a rewritten unit's relative link is replaced by systemctl's",
		base: map[string]string{usrlib + "rr.service": svc("WantedBy=multi-user.target"),
			etc + "multi-user.target.wants/rr.service": "-> ../../../../usr/lib/systemd/system/rr.service"},
		units: []types.Unit{unit("rr.service", on, svc("WantedBy=multi-user.target"))},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/rr.service", "/etc/systemd/system/rr.service")
		},
	}, {
		name: "a dangling base link by the unit's name is replaced by enable",
		base: map[string]string{usrlib + "dg.service": svc("WantedBy=multi-user.target"),
			etc + "multi-user.target.wants/dg.service": "-> /opt/gone/dg.service"},
		units: []types.Unit{unit("dg.service", on, "")},
		want:  "ok",
	}})
}

// TestSystemdMasks: masks, mask with enabled, and mask: false.
func TestSystemdMasks(t *testing.T) {
	enabledBase := map[string]string{usrlib + "mk.service": svc("WantedBy=multi-user.target"),
		etc + "multi-user.target.wants/mk.service": "-> /usr/lib/systemd/system/mk.service"}
	runCases(t, []sdCase{{
		name:  "mask plus enabled: false keeps the base's link (disable skips a masked unit)",
		base:  enabledBase,
		units: []types.Unit{masked("mk.service", true, off)},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/mk.service", "/dev/null")
			has(t, tree, "/multi-user.target.wants/mk.service", "/usr/lib/systemd/system/mk.service")
		},
	}, {
		name:  "mask: true with enabled: true",
		base:  enabledBase,
		units: []types.Unit{masked("mk.service", true, on)},
		want:  "refused", wantErr: "spec.config.systemd.units[mk.service].enabled: systemctl enable mk.service: failed to enable unit, unit /etc/systemd/system/mk.service is masked",
	}, {
		name:  "mask: true with enabled: true on a unit no tree has: the MCD skips the enable",
		units: []types.Unit{masked("nomk.service", true, on)},
		want:  "ok",
	}, {
		name:  "enabling a unit the base masks",
		base:  map[string]string{usrlib + "bm.service": svc("WantedBy=multi-user.target"), etc + "bm.service": "-> /dev/null"},
		units: []types.Unit{unit("bm.service", on, "")},
		want:  "refused", wantErr: "is masked",
	}, {
		name:  "mask: false unmasks and enables",
		base:  map[string]string{usrlib + "um.service": svc("WantedBy=multi-user.target"), etc + "um.service": "-> /dev/null"},
		units: []types.Unit{masked("um.service", false, on)},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/um.service")
			has(t, tree, "/multi-user.target.wants/um.service", "/usr/lib/systemd/system/um.service")
		},
	}, {
		name:  "mask: false removes a unit file the base has in /etc",
		base:  map[string]string{usrlib + "uf.service": svc("WantedBy=a.target"), etc + "uf.service": svc("WantedBy=b.target")},
		units: []types.Unit{masked("uf.service", false, on)},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { has(t, tree, "/a.target.wants/uf.service", "") },
	}, {
		name:  "mask: false with contents replaces the mask",
		base:  map[string]string{etc + "uc.service": "-> /dev/null"},
		units: []types.Unit{{Name: "uc.service", Mask: off, Enabled: on, Contents: ptr(svc("WantedBy=multi-user.target"))}},
		want:  "ok",
	}, {
		name:  "enable's alias would replace a MachineConfig's mask",
		base:  map[string]string{usrlib + "crio.service": svc("WantedBy=multi-user.target", "Alias=cri-o.service")},
		units: []types.Unit{unit("crio.service", on, ""), masked("cri-o.service", true, nil)},
		want:  "refused", wantErr: `already exists and is a symlink to "/dev/null"`,
	}, {
		name:  "Also= naming a masked unit is skipped",
		base:  map[string]string{usrlib + "am.service": svc("WantedBy=multi-user.target"), etc + "am.service": "-> /dev/null"},
		units: []types.Unit{unit("am-start.service", on, svc("WantedBy=multi-user.target", "Also=am.service"))},
		want:  "ok",
	}})
}

// TestSystemdRefusals: what else systemctl refuses, so mcbake must.
func TestSystemdRefusals(t *testing.T) {
	runCases(t, []sdCase{{
		name:  "an alias of another type",
		units: []types.Unit{unit("at.service", on, svc("Alias=at.socket"))},
		want:  "refused", wantErr: "cannot alias",
	}, {
		name:  "an alias taken by another unit",
		base:  map[string]string{usrlib + "owner.service": svc(), etc + "taken.service": "-> /usr/lib/systemd/system/owner.service"},
		units: []types.Unit{unit("tk.service", on, svc("Alias=taken.service"))},
		want:  "refused", wantErr: "already exists",
	}, {
		name:  "a section header with a quote",
		units: []types.Unit{unit("hdr.service", on, "[Unit]\nDescription=x\n[Ins\"tall]\nWantedBy=multi-user.target\n")},
		want:  "refused",
	}, {
		name:  "an instance alias for a plain unit",
		units: []types.Unit{unit("pa.service", on, svc("Alias=pa@x.service"))},
		want:  "refused",
	}, {
		name:  "a WantedBy= that is no unit name",
		units: []types.Unit{unit("wn.service", on, svc("WantedBy=not-a-unit"))},
		want:  "refused",
	}, {
		name:  "the link path already holds a file",
		base:  map[string]string{etc + "multi-user.target.wants/fl.service": "a file"},
		units: []types.Unit{unit("fl.service", on, svc("WantedBy=multi-user.target"))},
		want:  "refused",
	}, {
		name:  "a unit name systemctl does not know (Ignition accepts .snapshot)",
		units: []types.Unit{unit("old.snapshot", on, "[Unit]\nDescription=x\n")},
		want:  "refused", wantErr: `spec.config.systemd.units[old.snapshot].enabled: unit name "old.snapshot" is not one systemctl accepts`,
	}, {
		name:  "enabled: true on a unit no tree has is skipped by the MCD",
		units: []types.Unit{unit("ghost.service", on, "")},
		want:  "ok",
	}, {
		name:  "enabled: true without [Install] is fine",
		units: []types.Unit{unit("noinst.service", on, svc())},
		want:  "ok",
	}, {
		name:  "disabling a unit that has no file any more (removed by mask: false) fails over D-Bus",
		base:  map[string]string{etc + "rm.service": svc("WantedBy=multi-user.target")},
		units: []types.Unit{masked("rm.service", false, off)},
		want:  "refused",
	}, {
		name:  "Also= naming a unit that does not exist is only a warning",
		units: []types.Unit{unit("an.service", on, svc("WantedBy=multi-user.target", "Also=missing.service"))},
		want:  "ok",
	}, {
		name:  "quotes and continuation lines in [Install]",
		units: []types.Unit{unit("q.service", on, "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=\"a.target\" \\\n  b.target\n# WantedBy=c.target\n; x\nAlias='q2.service'\n")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/a.target.wants/q.service", "")
			has(t, tree, "/b.target.wants/q.service", "")
			has(t, tree, "/q2.service", "")
		},
	}})
}

// TestSystemdCorners: linked unit files, other unit types, Also= cycles,
// escaped names, masked and empty files, enabling by an alias's name.
func TestSystemdCorners(t *testing.T) {
	runCases(t, []sdCase{{
		name:  "a unit file linked from outside the search path",
		base:  map[string]string{"opt/lnk.service": svc("WantedBy=multi-user.target"), etc + "lnk.service": "-> /opt/lnk.service"},
		units: []types.Unit{unit("lnk.service", on, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			has(t, tree, "/multi-user.target.wants/lnk.service", "/opt/lnk.service")
		},
	}, {
		name:  "enabling by the name of an alias in /etc is refused",
		base:  map[string]string{usrlib + "real.service": svc("WantedBy=multi-user.target"), etc + "nick.service": "-> /usr/lib/systemd/system/real.service"},
		units: []types.Unit{unit("nick.service", on, "")},
		want:  "refused", wantErr: "refusing to operate on linked unit file nick.service",
	}, {
		name:  "disabling by an alias's name",
		base:  map[string]string{usrlib + "real2.service": svc("WantedBy=multi-user.target"), etc + "nick2.service": "-> /usr/lib/systemd/system/real2.service", etc + "multi-user.target.wants/real2.service": "-> /usr/lib/systemd/system/real2.service"},
		units: []types.Unit{unit("nick2.service", off, "")},
		want:  "ok",
	}, {
		name:  "contents for a name the base has as an alias",
		base:  map[string]string{usrlib + "real3.service": svc("WantedBy=multi-user.target"), etc + "nick3.service": "-> /usr/lib/systemd/system/real3.service", etc + "multi-user.target.wants/real3.service": "-> /usr/lib/systemd/system/real3.service"},
		units: []types.Unit{unit("nick3.service", on, svc("WantedBy=x.target"))},
		want:  "ok",
	}, {
		name:  "a socket and a timer",
		units: []types.Unit{unit("sock.socket", on, "[Socket]\nListenStream=/run/x.sock\n[Install]\nWantedBy=sockets.target\nAlias=sock2.socket\nAlso=tm.timer\n"), unit("tm.timer", nil, "[Timer]\nOnCalendar=daily\n[Install]\nWantedBy=timers.target\n")},
		want:  "ok",
	}, {
		name:  "Alias= on a mount unit is ignored",
		units: []types.Unit{unit("var-x.mount", on, "[Mount]\nWhat=/dev/x\nWhere=/var/x\n[Install]\nWantedBy=local-fs.target\nAlias=other.mount\n")},
		want:  "ok",
	}, {
		name:  "an Also= cycle",
		units: []types.Unit{unit("cy1.service", on, svc("WantedBy=multi-user.target", "Also=cy2.service")), unit("cy2.service", nil, svc("WantedBy=x.target", "Also=cy1.service"))},
		want:  "ok",
	}, {
		name:  "an escaped unit name",
		units: []types.Unit{unit(`dev-disk-by\x2dlabel-x.swap`, on, "[Swap]\nWhat=/dev/disk/by-label/x\n[Install]\nWantedBy=swap.target\n")},
		want:  "ok",
	}, {
		name:  "an empty unit file in the base masks it",
		base:  map[string]string{usrlib + "empty.service": ""},
		units: []types.Unit{unit("empty.service", on, "")},
		want:  "refused",
	}, {
		name:  "a drop-in linked to /dev/null is ignored",
		base:  map[string]string{usrlib + "dn.service": svc("WantedBy=multi-user.target"), usrlib + "dn.service.d/x.conf": "[Install]\nWantedBy=x.target\n", etc + "dn.service.d/x.conf": "-> /dev/null"},
		units: []types.Unit{unit("dn.service", on, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) { lacks(t, tree, "/x.target.wants/dn.service") },
	}, {
		name:  "the default instance is masked",
		base:  map[string]string{etc + "mi@def.service": "-> /dev/null"},
		units: []types.Unit{unit("mi@.service", on, svc("DefaultInstance=def", "WantedBy=multi-user.target"))},
		want:  "refused",
	}, {
		name:  "disabling a template removes its instances' links",
		base:  map[string]string{usrlib + "ti@.service": svc("WantedBy=multi-user.target"), etc + "multi-user.target.wants/ti@a.service": "-> /usr/lib/systemd/system/ti@.service", etc + "x.target.wants/ti@b.service": "-> /usr/lib/systemd/system/ti@.service"},
		units: []types.Unit{unit("ti@.service", off, "")},
		want:  "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/multi-user.target.wants/ti@a.service")
			lacks(t, tree, "/x.target.wants/ti@b.service")
		},
	}, {
		name:  "a preset of an alias's name does nothing",
		base:  map[string]string{usrlib + "real4.service": svc("WantedBy=multi-user.target"), etc + "nick4.service": "-> /usr/lib/systemd/system/real4.service"},
		units: []types.Unit{unit("nick4.service", nil, "", dropin("x.conf", "[Service]\n"))},
		want:  "ok",
	}, {
		name:  "RequiredBy= links and the legacy Alias= form",
		units: []types.Unit{unit("rq.service", on, svc("RequiredBy=a.target", "Alias=b.target.wants/rq.service"))},
		want:  "ok",
	}, {
		name:  "enabled: false on a template with DefaultInstance=",
		base:  map[string]string{usrlib + "dfl@.service": svc("DefaultInstance=one", "WantedBy=multi-user.target"), etc + "multi-user.target.wants/dfl@one.service": "-> /usr/lib/systemd/system/dfl@.service"},
		units: []types.Unit{unit("dfl@.service", off, "")},
		want:  "ok",
	}, {
		name:  "a storage file at the enablement link path",
		files: map[string]string{"/etc/systemd/system/multi-user.target.wants/sfl.service": "x"},
		units: []types.Unit{unit("sfl.service", on, svc("WantedBy=multi-user.target"))},
		want:  "refused",
	}, {
		name:  "CRLF line ends and a BOM",
		units: []types.Unit{unit("crlf.service", on, "\ufeff[Service]\r\nExecStart=/bin/true\r\n[Install]\r\nWantedBy=multi-user.target\r\n")},
		want:  "ok",
	}})
}

// TestSystemdFixtures: the eight reference MachineConfigs against an
// RHCOS-like base whose unit files include those the MachineConfigs
// enable, disable or extend without contents.
func TestSystemdFixtures(t *testing.T) {
	var cases []sdCase
	for _, p := range fixtures(t) {
		base := rhcosSpec()
		for _, u := range machineconfig.Merge(loadFixture(t, p)).Units {
			if !HasContent(u.Contents) {
				base[usrlib+u.Name] = svc("WantedBy=multi-user.target")
			}
		}
		base[etc+"multi-user.target.wants/kubelet-auto-node-size.service"] = "-> /usr/lib/systemd/system/kubelet-auto-node-size.service"
		base[preset+"40-rhcos.preset"] = "enable *\n"
		cases = append(cases, sdCase{name: filepath.Base(p), base: base, raw: p, want: "ok"})
	}
	runCases(t, cases)
}

// TestSystemdEnablementCheck: the MCD enables, then disables, then checks
// each unit with is-enabled; a disable that undoes an enable (Also=, a
// disabled template) makes the node Degraded, and mcbake says so
// (Result.Degrading) where systemctl does.
func TestSystemdEnablementCheck(t *testing.T) {
	runCases(t, []sdCase{{
		name: "a disabled unit's Also= names an enabled one",
		units: []types.Unit{
			unit("ec-a.service", on, svc("WantedBy=multi-user.target")),
			unit("ec-b.service", off, svc("WantedBy=multi-user.target", "Also=ec-a.service")),
		},
		want: "ok", degrading: []string{"ec-a.service"},
	}, {
		name: "a disabled template removes an enabled instance's link",
		units: []types.Unit{
			unit("ec-t@.service", off, svc("WantedBy=multi-user.target")),
			unit("ec-t@x.service", on, svc("WantedBy=multi-user.target")),
		},
		want: "ok", degrading: []string{"ec-t@x.service"},
	}, {
		name: "the links the daemon deletes after every update",
		base: map[string]string{
			"etc/systemd/system/network-online.target.requires/node-valid-hostname.service": "-> /etc/systemd/system/node-valid-hostname.service",
		},
		units: []types.Unit{unit("ovs-configuration.service", on, svc("WantedBy=network-online.target"))},
		want:  "ok", degrading: []string{"ovs-configuration.service"},
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/network-online.target.wants/ovs-configuration.service")
			lacks(t, tree, "/network-online.target.requires/node-valid-hostname.service")
		},
	}, {
		name: "an empty directory where the daemon deletes a leaked link",
		base: map[string]string{"etc/systemd/system/network-online.target.wants/ovs-configuration.service/": ""},
		want: "ok",
		check: func(t *testing.T, tree map[string]sdNode) {
			lacks(t, tree, "/network-online.target.wants/ovs-configuration.service")
		},
	}, {
		name:    "a directory that is not empty where the daemon deletes a leaked link",
		base:    map[string]string{"etc/systemd/system/network-online.target.wants/ovs-configuration.service/x": "x"},
		units:   []types.Unit{unit("ec-e.service", on, svc("WantedBy=multi-user.target"))},
		want:    "refused",
		wantErr: "fails on a directory that is not empty",
	}, {
		name: "enabled and disabled units that do not touch",
		units: []types.Unit{
			unit("ec-c.service", on, svc("WantedBy=multi-user.target")),
			unit("ec-d.service", off, svc("WantedBy=multi-user.target")),
		},
		want: "ok", degrading: []string{},
	}})
}

// TestStaleLinkDirectoryOwned: the directory of a link the daemon deletes
// after every update stays as a MachineConfig gives it.
func TestStaleLinkDirectoryOwned(t *testing.T) {
	mcs, err := machineconfig.Parse("stale.yaml", []byte(`kind: MachineConfig
metadata: {name: 99-stale}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      directories:
        - {path: /etc/systemd/system/network-online.target.wants, mode: 448}
    systemd:
      units:
        - name: ovs-configuration.service
          enabled: true
          contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=network-online.target\n"
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Render(context.Background(), machineconfig.Merge(mcs), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Entries {
		switch e.Path {
		case "/etc/systemd/system/network-online.target.wants":
			if e.Type != manifest.Directory || e.Mode != 0o700 || e.Source.Field != "spec.config.storage.directories[0]" {
				t.Errorf("%s = %s %o from %s, want the MachineConfig's directory, 0700", e.Path, e.Type, e.Mode, e.Source.Field)
			}
		case "/etc/systemd/system/network-online.target.wants/ovs-configuration.service":
			t.Errorf("%s is rendered (%s), want it deleted as the daemon does", e.Path, e.Type)
		}
	}
}

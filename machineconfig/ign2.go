package machineconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/ign-converter/translate/v23tov30"
	"github.com/coreos/ign-converter/util"
	ign2errors "github.com/coreos/ignition/config/shared/errors"
	ign2 "github.com/coreos/ignition/config/v2_2"
	ign2types "github.com/coreos/ignition/config/v2_2/types"
	ign23 "github.com/coreos/ignition/config/v2_3"
	ign2report "github.com/coreos/ignition/config/validate/report"
	v31 "github.com/coreos/ignition/v2/config/v3_1/translate"
	v32 "github.com/coreos/ignition/v2/config/v3_2/translate"
	v33 "github.com/coreos/ignition/v2/config/v3_3/translate"
	v34 "github.com/coreos/ignition/v2/config/v3_4/translate"
	v35 "github.com/coreos/ignition/v2/config/v3_5/translate"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// parseIgnition2 parses a spec 2.x config (2.2 and the older ones
// ignition's v2_2 parser upgrades) and converts it to spec 3.5 exactly as
// the MCO's ParseAndConvertConfig does (docs/design.md, "Ignition 2
// configs"): duplicate files, units and users are folded as the MCO folds
// them, then ign-converter's v2.3 to v3.0 translation with the root
// filesystem at /, then ignition's own 3.0 to 3.5 translations. ok is
// false when raw is not a spec 2 config at all, so that the caller keeps
// its spec 3 error. fields maps JSON paths of the converted config to
// those of the config as written (the folding moves files and users).
func parseIgnition2(raw []byte) (cfg types.Config, fields map[string]string, ok bool, err error) {
	old, rpt, err := ign2.Parse(raw)
	if errors.Is(err, ign2errors.ErrUnknownVersion) {
		return types.Config{}, nil, false, nil
	}
	if err != nil || rpt.IsFatal() {
		return types.Config{}, nil, true, ign2ReportErrors(err, rpt.Entries)
	}
	folded, fields, err := foldDuplicates(old)
	if err != nil {
		return types.Config{}, nil, true, err
	}
	v30, err := v23tov30.Translate(ign23.Translate(folded), map[string]string{"root": "/"})
	if err != nil {
		return types.Config{}, nil, true, converterError(err, folded, fields)
	}
	return v35.Translate(v34.Translate(v33.Translate(v32.Translate(v31.Translate(v30))))), fields, true, nil
}

// ign2ReportErrors turns the spec 2 parser's report into field errors at
// spec.config (its lines and columns count in the JSON the parser was
// given, not in the file).
func ign2ReportErrors(err error, entries []ign2report.Entry) error {
	var errs []error
	for _, e := range entries {
		if e.Kind == ign2report.EntryError {
			errs = append(errs, &FieldError{Field: "spec.config", Reason: ReasonInvalid, Msg: "Ignition spec 2: " + e.Message})
		}
	}
	if len(errs) == 0 && err != nil {
		errs = append(errs, &FieldError{Field: "spec.config", Reason: ReasonInvalid, Msg: "Ignition spec 2: " + err.Error()})
	}
	return errors.Join(errs...)
}

// foldDuplicates is the MCO's removeIgnDuplicateFilesUnitsUsers: spec 3
// refuses what spec 2 allowed, several files with one path, units with
// one name and several users in one config. Files and units are walked
// from the last: the last definition of a path or name wins, and the
// result is in reverse order; a unit defined again contributes the
// drop-ins the winner lacks. Every user must be core; their SSH keys are
// collected into the last one, deduplicated. fields maps the folded
// config's paths back to the written ones.
func foldDuplicates(cfg ign2types.Config) (ign2types.Config, map[string]string, error) {
	fields := map[string]string{}
	var files []ign2types.File
	seen := map[string]bool{}
	for i := len(cfg.Storage.Files) - 1; i >= 0; i-- {
		f := cfg.Storage.Files[i]
		if seen[f.Path] {
			continue
		}
		seen[f.Path] = true
		fields[fmt.Sprintf("spec.config.storage.files[%d]", len(files))] = fmt.Sprintf("spec.config.storage.files[%d]", i)
		files = append(files, f)
	}
	var units []ign2types.Unit
	byName := map[string]int{}
	for i := len(cfg.Systemd.Units) - 1; i >= 0; i-- {
		u := cfg.Systemd.Units[i]
		j, dup := byName[u.Name]
		if !dup {
			byName[u.Name] = len(units)
			units = append(units, u)
			continue
		}
		for _, d := range u.Dropins {
			if !hasDropin(units[j], d.Name) {
				units[j].Dropins = append(units[j].Dropins, d)
			}
		}
	}
	users, err := foldUsers(cfg.Passwd.Users, fields)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Storage.Files, cfg.Systemd.Units, cfg.Passwd.Users = files, units, users
	return cfg, fields, nil
}

func hasDropin(u ign2types.Unit, name string) bool {
	for _, d := range u.Dropins {
		if d.Name == name {
			return true
		}
	}
	return false
}

// foldUsers collects every user's SSH keys into the last user, which
// must be core like every other: the last user's keys first, then those
// of the users before it from the last to the first, each key once.
func foldUsers(users []ign2types.PasswdUser, fields map[string]string) ([]ign2types.PasswdUser, error) {
	if len(users) == 0 {
		return nil, nil
	}
	var errs []error
	for i, u := range users {
		if u.Name != "core" {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("spec.config.passwd.users[%d].name", i), Reason: ReasonUnsupported,
				Msg: fmt.Sprintf("user %q: only the core user is supported by the machine-config-daemon", u.Name)})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	last := len(users) - 1
	out := users[last]
	out.SSHAuthorizedKeys = nil
	fields["spec.config.passwd.users[0]"] = fmt.Sprintf("spec.config.passwd.users[%d]", last)
	seen := map[ign2types.SSHAuthorizedKey]bool{}
	for i := last; i >= 0; i-- {
		for j, k := range users[i].SSHAuthorizedKeys {
			if seen[k] {
				continue
			}
			seen[k] = true
			fields[fmt.Sprintf("spec.config.passwd.users[0].sshAuthorizedKeys[%d]", len(out.SSHAuthorizedKeys))] =
				fmt.Sprintf("spec.config.passwd.users[%d].sshAuthorizedKeys[%d]", i, j)
			out.SSHAuthorizedKeys = append(out.SSHAuthorizedKeys, k)
		}
	}
	return []ign2types.PasswdUser{out}, nil
}

// converterError turns ign-converter's refusals into field errors at the
// field they are about, in the config as written.
func converterError(err error, cfg ign2types.Config, fields map[string]string) error {
	field := "spec.config"
	var (
		dupInode  util.DuplicateInodeError
		dupInodeP *util.DuplicateInodeError
		ownLink   *util.UsesOwnLinkError
		noFS      util.NoFilesystemError
		dupDropin util.DuplicateDropinError
	)
	switch {
	case errors.Is(err, util.UsesNetworkdError):
		field = "spec.config.networkd.units"
	case errors.As(err, &dupInode):
		field = storageField(cfg, dupInode.New, fields)
	case errors.As(err, &dupInodeP):
		field = storageField(cfg, dupInodeP.New, fields)
	case errors.As(err, &ownLink):
		field = storageField(cfg, ownLink.Name, fields)
	case errors.As(err, &noFS):
		for i, fs := range cfg.Storage.Filesystems {
			if fs.Name == string(noFS) {
				field = fmt.Sprintf("spec.config.storage.filesystems[%d]", i)
			}
		}
	case errors.As(err, &dupDropin):
		field = fmt.Sprintf("spec.config.systemd.units[%s].dropins[%s]", dupDropin.Unit, dupDropin.Name)
	}
	return &FieldError{Field: field, Reason: ReasonUnsupported, Msg: "converting Ignition spec 2 to 3 (as the MCO does): " + oneLine(err.Error())}
}

// storageField finds the field of a converter description ("File: /p",
// "Directory: /p", "Link: /p").
func storageField(cfg ign2types.Config, desc string, fields map[string]string) string {
	kind, p, ok := strings.Cut(desc, ": ")
	if !ok {
		return "spec.config.storage"
	}
	switch kind {
	case "File":
		for i, f := range cfg.Storage.Files {
			if f.Path == p {
				return mapField(fields, fmt.Sprintf("spec.config.storage.files[%d]", i))
			}
		}
	case "Directory":
		for i, d := range cfg.Storage.Directories {
			if d.Path == p {
				return fmt.Sprintf("spec.config.storage.directories[%d]", i)
			}
		}
	case "Link":
		for i, l := range cfg.Storage.Links {
			if l.Path == p {
				return fmt.Sprintf("spec.config.storage.links[%d]", i)
			}
		}
	}
	return "spec.config.storage"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// mapField rewrites the longest prefix of field that fields maps (a
// prefix ends at the end, a "." or a "[").
func mapField(fields map[string]string, field string) string {
	for end := len(field); end > 0; end-- {
		if end < len(field) && field[end] != '.' && field[end] != '[' {
			continue
		}
		if to, ok := fields[field[:end]]; ok {
			return to + field[end:]
		}
	}
	return field
}

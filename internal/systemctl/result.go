package systemctl

import (
	"fmt"
	"syscall"
)

// Failed reports whether the call fails as the machine-config-daemon
// sees it: systemctl talks to systemd over D-Bus, whose reply is an error
// when the call returned one, or when every change it reports is a
// failure.
func (r Result) Failed() bool {
	if r.R < 0 {
		return true
	}
	bad, good := false, false
	for _, c := range r.Changes {
		if c.Type < 0 {
			bad = true
		} else {
			good = true
		}
	}
	return bad && !good
}

// Errors returns the failures among the changes, each worded as
// systemctl words it for verb; a failed call without any is one error
// from its return value.
func (r Result) Errors(verb string) []Failure {
	var out []Failure
	for _, c := range r.Changes {
		if c.Type < 0 {
			out = append(out, Failure{Origin: c.Origin, Msg: message(verb, c)})
		}
	}
	if len(out) == 0 && r.Failed() {
		out = append(out, Failure{Msg: fmt.Sprintf("failed to %s: %s", verb, errnoString(r.R))})
	}
	return out
}

// Failure is one failure of a call, with the name given to systemctl it
// concerns ("" when unknown).
type Failure struct {
	Origin string
	Msg    string
}

func errnoString(e int) string {
	if e == -eNODE {
		return "a specifier only the node can resolve"
	}
	return syscall.Errno(-e).Error()
}

// message is install_changes_dump's wording of a failed change.
func message(verb string, c InstallChange) string {
	switch -c.Type {
	case eEXIST:
		if c.Source != "" {
			return fmt.Sprintf("failed to %s unit, file %q already exists and is a symlink to %q", verb, c.Path, c.Source)
		}
		return fmt.Sprintf("failed to %s unit, file %q already exists", verb, c.Path)
	case eRFKILL:
		return fmt.Sprintf("failed to %s unit, unit %s is masked", verb, c.Path)
	case eADDRNOTAVAIL:
		return fmt.Sprintf("failed to %s unit, unit %s is transient or generated", verb, c.Path)
	case eBADSLT:
		return fmt.Sprintf("failed to %s unit, invalid specifier in %q", verb, c.Path)
	case eIDRM:
		return fmt.Sprintf("failed to %s %s, destination unit %s is a non-template unit", verb, c.Source, c.Path)
	case eUCLEAN:
		return fmt.Sprintf("failed to %s unit, %q is not a valid unit name", verb, c.Path)
	case eLOOP:
		return fmt.Sprintf("failed to %s unit, refusing to operate on linked unit file %s", verb, c.Path)
	case eXDEV:
		if c.Source != "" {
			return fmt.Sprintf("failed to %s unit, cannot alias %s as %s", verb, c.Source, c.Path)
		}
		return fmt.Sprintf("failed to %s unit, invalid unit reference %q", verb, c.Path)
	case eNOENT:
		return fmt.Sprintf("failed to %s unit, unit %s does not exist", verb, c.Path)
	case eUNATCH:
		return fmt.Sprintf("failed to %s unit, cannot resolve specifiers in %q", verb, c.Path)
	case eNODE:
		return fmt.Sprintf("cannot %s unit: %q uses a specifier only the node can resolve", verb, c.Path)
	}
	return fmt.Sprintf("failed to %s unit, file %q: %s", verb, c.Path, errnoString(c.Type))
}

// ErrnoString words a negative errno.
func ErrnoString(e int) string { return errnoString(e) }

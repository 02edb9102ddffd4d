package templates

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openshift/imagebuilder"
)

// instruction is a Containerfile instruction as buildah's parser (the
// openshift/imagebuilder one) resolves it: flags, and arguments after
// JSON decoding, variable expansion and quote removal.
type instruction struct {
	Command string
	Flags   []string
	Args    []string
}

func parse(t *testing.T, containerfile string) []instruction {
	t.Helper()
	root, err := imagebuilder.ParseDockerfile(strings.NewReader(containerfile))
	if err != nil {
		t.Fatalf("parsing %q: %v", containerfile, err)
	}
	var out []instruction
	for _, n := range root.Children {
		step := &imagebuilder.Step{Env: []string{"HOME=/root"}}
		if err := step.Resolve(n); err != nil {
			t.Fatalf("resolving %q: %v", n.Original, err)
		}
		out = append(out, instruction{Command: step.Command, Flags: step.Flags, Args: step.Args})
	}
	return out
}

// awkward are paths MachineConfigs can have that a Containerfile must
// quote: systemd escapes, spaces, quotes, variables, globs.
var awkward = []string{
	"/etc/systemd/system/var-lib\\x2dfoo.mount",
	"/etc/mcbake test/it's.conf",
	`/etc/"quoted"`,
	"/etc/$HOME/${HOME}",
	"/etc/glob*?[a]",
	"/etc/tab\there",
	"/etc/plain-path_1.2+x@y:z,w=v%",
}

func TestWord(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/etc/plain-path_1.2", "/etc/plain-path_1.2"},
		{"sha256:0123abcd", "sha256:0123abcd"},
		{"", "''"},
		{"/a b", "'/a b'"},
		{"it's", `'it'"'"'s'`},
		{"$HOME", "'$HOME'"},
		{`a\x2d`, `'a\x2d'`},
	}
	for _, tt := range tests {
		got, err := Word(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Word(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := Word("a\nb"); err == nil {
		t.Errorf("Word with a line break = nil error, want one")
	}
}

// TestCopyArgsRoundTrip checks that buildah's parser gets back exactly the
// source and destination, however awkward.
func TestCopyArgsRoundTrip(t *testing.T) {
	for _, p := range awkward {
		args, err := CopyArgs("chown/0/", p)
		if err != nil {
			t.Fatalf("CopyArgs(%q): %v", p, err)
		}
		got := parse(t, "FROM scratch\nCOPY --chown=1:2 "+args+"\n")[1]
		want := instruction{Command: "copy", Flags: []string{"--chown=1:2"}, Args: []string{"chown/0/", p}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("COPY %s (-want +got):\n%s", args, diff)
		}
	}
	if got, _ := CopyArgs("rootfs/", "/"); got != "rootfs/ /" {
		t.Errorf(`CopyArgs("rootfs/", "/") = %q, want "rootfs/ /"`, got)
	}
}

func TestExecFormRoundTrip(t *testing.T) {
	args := append([]string{"rm", "-f", "--"}, awkward...)
	got := parse(t, "FROM scratch\nRUN "+ExecForm(args...)+"\n")[1]
	if diff := cmp.Diff(instruction{Command: "run", Flags: []string{}, Args: args}, got, emptyFlags); diff != "" {
		t.Errorf("RUN %s (-want +got):\n%s", ExecForm(args...), diff)
	}
}

var emptyFlags = cmp.Transformer("emptyFlags", func(f []string) []string {
	if len(f) == 0 {
		return nil
	}
	return f
})

func TestExecuteContainerfile(t *testing.T) {
	dest, err := CopyArgs("chown/1/", "/etc/mcbake test/")
	if err != nil {
		t.Fatal(err)
	}
	data := ContainerfileData{
		Header: []string{"Generated for a test."},
		From:   "oci:/base:latest",
		Rootfs: "rootfs/",
		Chowns: []Copy{
			{Comment: `"/var/home/core/.ssh"`, Flags: []string{"--chown=1000:1000", "--chmod=0700"}, Args: "chown/0/ /var/home/core/"},
			{Flags: []string{"--chown=1000:0"}, Args: dest},
		},
		Manifest: &Copy{Args: "manifest.json /usr/share/mcbake/manifest.json"},
		Remove:   ExecForm("rm", "-f", "--", "/etc/systemd/system/multi-user.target.wants/a.service"),
		Labels:   []Label{{Key: "io.mcbake.a", Value: "sha256:1"}, {Key: "io.mcbake.b", Value: "'x y'"}},
		Append:   "RUN [\"true\"]",
	}
	var b bytes.Buffer
	if err := Execute(&b, Containerfile, data); err != nil {
		t.Fatal(err)
	}
	want := `# Generated for a test.
FROM oci:/base:latest

# The rendered MachineConfigs at their resolved paths. COPY makes every
# path root's; the COPY lines after it give the others their owners.
COPY rootfs/ /
# "/var/home/core/.ssh"
COPY --chown=1000:1000 --chmod=0700 chown/0/ /var/home/core/
COPY --chown=1000:0 ["chown/1/", "'/etc/mcbake test/'"]

# The ownership manifest of this build (its digest is the
# io.mcbake.manifest.digest label).
COPY manifest.json /usr/share/mcbake/manifest.json

# Paths the MachineConfigs remove from the base (systemctl disable).
RUN ["rm", "-f", "--", "/etc/systemd/system/multi-user.target.wants/a.service"]

LABEL \
      io.mcbake.a=sha256:1 \
      io.mcbake.b='x y'

# --containerfile-append
RUN ["true"]
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Containerfile (-want +got):\n%s", diff)
	}
	got := parse(t, b.String())
	wantInstr := []instruction{
		{Command: "from", Args: []string{"oci:/base:latest"}},
		{Command: "copy", Args: []string{"rootfs/", "/"}},
		{Command: "copy", Flags: []string{"--chown=1000:1000", "--chmod=0700"}, Args: []string{"chown/0/", "/var/home/core/"}},
		{Command: "copy", Flags: []string{"--chown=1000:0"}, Args: []string{"chown/1/", "/etc/mcbake test/"}},
		{Command: "copy", Args: []string{"manifest.json", "/usr/share/mcbake/manifest.json"}},
		{Command: "run", Args: []string{"rm", "-f", "--", "/etc/systemd/system/multi-user.target.wants/a.service"}},
		{Command: "label", Args: []string{"io.mcbake.a", "sha256:1", "io.mcbake.b", "x y"}},
		{Command: "run", Args: []string{"true"}},
	}
	if diff := cmp.Diff(wantInstr, got, emptyFlags); diff != "" {
		t.Errorf("parsed Containerfile (-want +got):\n%s", diff)
	}
}

func TestExecuteMinimal(t *testing.T) {
	var b bytes.Buffer
	err := Execute(&b, Containerfile, ContainerfileData{From: "quay.io/x@sha256:1", Rootfs: "rootfs/",
		Manifest: &Copy{Args: "manifest.json /usr/share/mcbake/manifest.json"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"RUN", "LABEL", "--containerfile-append", "--chown"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("a Containerfile without removals, labels or appended lines has %q:\n%s", absent, b.String())
		}
	}
	if err := Execute(&b, "nope.tmpl", nil); err == nil {
		t.Errorf("Execute of an unknown template = nil error")
	}
}

package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

// ErrNoImage is returned by Sysroot.Image for a deployment whose commit
// does not record the container image it was made from.
var ErrNoImage = errors.New("the deployment's commit records no container image")

// Commit metadata keys ostree-ext (rpm-ostree, bootc) writes when it
// imports a container image.
const (
	metaManifestDigest = "ostree.manifest-digest"
	metaManifest       = "ostree.manifest"
	metaConfig         = "ostree.container.image-config"
)

// Image returns the container image the deployment was made from, as
// ostree-ext records it in the commit: the manifest digest, the config
// digest the manifest names and the config's diff IDs. It runs `ostree
// show` on the sysroot's repository.
func (s *Sysroot) Image(d *Deployment) (manifest.ImageRef, error) {
	var ref manifest.ImageRef
	dg, err := s.commitMeta(d.Checksum, metaManifestDigest)
	if err != nil {
		return ref, err
	}
	ref.Digest = digest.Digest(dg)
	if m, err := s.commitMeta(d.Checksum, metaManifest); err == nil {
		var man struct {
			Config struct {
				Digest digest.Digest `json:"digest"`
			} `json:"config"`
		}
		if err := json.Unmarshal([]byte(m), &man); err != nil {
			return ref, fmt.Errorf("commit %s: %s: %w", d.Checksum, metaManifest, err)
		}
		ref.Config = man.Config.Digest
	}
	if c, err := s.commitMeta(d.Checksum, metaConfig); err == nil {
		var cfg struct {
			RootFS struct {
				DiffIDs []digest.Digest `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := json.Unmarshal([]byte(c), &cfg); err != nil {
			return ref, fmt.Errorf("commit %s: %s: %w", d.Checksum, metaConfig, err)
		}
		ref.DiffIDs = cfg.RootFS.DiffIDs
	}
	return ref, nil
}

// commitMeta reads the string metadata key of a commit; ErrNoImage when
// the commit lacks it.
func (s *Sysroot) commitMeta(checksum, key string) (string, error) {
	repo := filepath.Join(s.Physical, "ostree", "repo")
	cmd := exec.Command("ostree", "show", "--repo="+repo, "--print-metadata-key="+key, checksum)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "No such metadata key") {
		return "", fmt.Errorf("%w (commit %s has no %s)", ErrNoImage, checksum, key)
	}
	if err != nil {
		return "", fmt.Errorf("ostree show %s: %w", checksum, err)
	}
	return parseGVariantString(strings.TrimSpace(string(out)))
}

// parseGVariantString decodes a string in GVariant's text format, as
// `ostree show --print-metadata-key` prints it: single or double quoted,
// with backslash escapes.
func parseGVariantString(s string) (string, error) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("not a GVariant string: %.40q", s)
	}
	in := s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' || i+1 == len(in) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := in[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if i+1+n > len(in) {
				return "", fmt.Errorf("truncated escape in GVariant string")
			}
			r, err := strconv.ParseUint(in[i+1:i+1+n], 16, 32)
			if err != nil {
				return "", fmt.Errorf("bad escape in GVariant string: %w", err)
			}
			b.WriteRune(rune(r))
			i += n
		default:
			b.WriteByte(e) // \\ \' \" and anything else stand for themselves
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", errors.New("GVariant string is not UTF-8")
	}
	return b.String(), nil
}

// checkPlan refuses a plan made for other images than the booted and the
// staged deployments', or listing other paths to write than rec.
func checkPlan(s *Sysroot, booted, staged *Deployment, p *revert.Plan, rec *Record, res *render.Result) error {
	if err := p.Check(); err != nil {
		return err
	}
	var lines []string
	for _, x := range []struct {
		what string
		d    *Deployment
		want manifest.ImageRef
	}{{"the booted deployment", booted, p.Image}, {"the staged deployment", staged, p.Base}} {
		got, err := s.Image(x.d)
		if err != nil {
			lines = append(lines, fmt.Sprintf("plan: cannot tell which image %s (%s) is: %v", x.what, x.d.Name(), err))
			continue
		}
		if !x.want.Same(got) {
			lines = append(lines, fmt.Sprintf("plan: made for image %s %s, but %s is %s (config %s)", orDash(x.want.Reference), x.want.Digest, x.what, got.Digest, got.Config))
		}
	}
	local := map[string]bool{}
	for _, c := range rec.Written() {
		local[c.Path] = true
	}
	// What the staged deployment already holds as wanted needs no write:
	// a run after one that wrote the plan's paths agrees with it.
	done, owned := map[string]bool{}, map[string]bool{}
	for _, c := range rec.Changes {
		owned[c.Path] = true
		if c.AsWanted && c.Op == Unchanged {
			done[c.Path] = true
		}
	}
	planned := map[string]bool{}
	for _, pe := range p.Rewrite {
		planned[pe.Path] = true
		// What the rendering against the staged deployment does not list
		// at all because it already is so (a parent the MCD would make, a
		// link a disable removes), as Rewrite accepts it; a path it lists
		// is judged by its Change.
		if _, ok := implied(pe, res); ok && !owned[pe.Path] {
			done[pe.Path] = true
		}
	}
	for _, pth := range sortedKeys(planned) {
		if !local[pth] && !done[pth] {
			lines = append(lines, fmt.Sprintf("plan: %s: the plan rewrites it, the node computes nothing to write there", pth))
		}
	}
	for _, pth := range sortedKeys(local) {
		if !planned[pth] {
			lines = append(lines, fmt.Sprintf("plan: %s: the node computes a write the plan does not list", pth))
		}
	}
	if len(lines) > 0 {
		return &PlanMismatchError{Lines: lines}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

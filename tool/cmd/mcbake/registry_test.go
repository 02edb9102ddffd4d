package main

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/signature/sigstore"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/tool/internal/testing/registrytest"
)

// regEnv is an env with a real registry holding the generated base at
// os/base:latest.
type regEnv struct {
	*env
	reg  *registrytest.Registry
	base string // docker://HOST/os/base:latest
}

func newRegEnv(t *testing.T, opts testbase.Options) *regEnv {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Skip("skopeo not installed (make test installs it): skipping the registry test")
	}
	reg := registrytest.Start(t)
	e := newEnv(t)
	src := e.base
	if opts.Platforms != nil || opts.Size != nil {
		dir := filepath.Join(e.dir, "base-"+strconv.Itoa(len(opts.Platforms)))
		if _, err := testbase.Write(dir, opts); err != nil {
			t.Fatal(err)
		}
		src = "oci:" + dir + ":latest"
	}
	var extra []string
	if len(opts.Platforms) > 1 {
		extra = []string{"--all"}
	}
	r := &regEnv{env: e, reg: reg, base: reg.Push(t, src, "os/base:latest", extra...)}
	e.extra = []string{"--registries-conf", reg.EmptyRegistriesConf()}
	e.policy = "testdata/registry-policy.json"
	return r
}

func (r *regEnv) ref(repo string) string { return "docker://" + r.reg.Host + "/" + repo }

// creds are the flags that reach the registry with the right password.
func (r *regEnv) creds() []string {
	return []string{"--cert-dir", r.reg.CertDir, "--creds", registrytest.User + ":" + registrytest.Password}
}

func (r *regEnv) buildWith(out string, flags ...string) (int, string, string) {
	args := append([]string{"build", "--base", r.base, "-o", out, "-f", workerMC}, r.imageArgs()...)
	return r.run(append(args, flags...)...)
}

func (r *regEnv) skopeo(t *testing.T, args ...string) []byte {
	t.Helper()
	full := append([]string{"--registries-conf", r.reg.EmptyRegistriesConf()}, args...)
	out, err := exec.Command("skopeo", full...).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("skopeo %v: %v\n%s", args, err, stderr)
	}
	return out
}

// TestRegistryBuildCredentialSources builds docker:// → docker:// with
// each way of giving credentials, and checks that every build pushed the
// same image, which skopeo, manifest, diff and verify then read back from
// the registry.
func TestRegistryBuildCredentialSources(t *testing.T) {
	r := newRegEnv(t, testbase.Options{})
	var first string
	authFile := r.reg.AuthFile(t, registrytest.User, registrytest.Password)
	pass := registrytest.User + ":" + registrytest.Password
	tests := []struct {
		name  string
		env   map[string]string
		flags []string
	}{
		{"--authfile", nil, []string{"--authfile", authFile, "--cert-dir", r.reg.CertDir}},
		{"REGISTRY_AUTH_FILE", map[string]string{"REGISTRY_AUTH_FILE": authFile}, []string{"--cert-dir", r.reg.CertDir}},
		{"--creds", nil, r.creds()},
		{"per side", nil, []string{"--src-creds", pass, "--dest-authfile", authFile,
			"--src-cert-dir", r.reg.CertDir, "--dest-cert-dir", r.reg.CertDir}},
		{"per side over wrong shared flags", nil, []string{"--creds", "nobody:wrong", "--cert-dir", t.TempDir(),
			"--src-creds", pass, "--dest-creds", pass, "--src-cert-dir", r.reg.CertDir, "--dest-cert-dir", r.reg.CertDir}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			out := r.ref("ci/layered" + strconv.Itoa(i) + ":latest")
			before, err := r.reg.Requests()
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := r.buildWith(out, append(tt.flags, "--quiet")...)
			if code != 0 {
				t.Fatalf("build: exit %d\n%s", code, stderr)
			}
			after, err := r.reg.Requests()
			if err != nil {
				t.Fatal(err)
			}
			// The mounts authenticate with the destination's credentials.
			notAsked(t, readRegistryManifest(t, r, "ci/layered"+strconv.Itoa(i)+"@"+strings.TrimSpace(stdout)), before, after)
			if got := strings.TrimSpace(stdout); first == "" {
				first = got
			} else if got != first {
				t.Errorf("pushed %s, want %s as the first build", got, first)
			}
		})
	}
	pushed := r.ref("ci/layered0@" + first)
	var inspect struct {
		Digest string
		Labels map[string]string
	}
	if err := json.Unmarshal(r.skopeo(t, "inspect", "--cert-dir", r.reg.CertDir, "--creds", pass, pushed), &inspect); err != nil {
		t.Fatal(err)
	}
	if inspect.Digest != first || inspect.Labels["io.mcbake.manifest.digest"] == "" {
		t.Errorf("skopeo inspect: digest %s, labels %v; want %s with the manifest label", inspect.Digest, inspect.Labels, first)
	}
	for _, args := range [][]string{
		{"manifest", pushed},
		{"diff", "--base", r.base, "--image", pushed, "--format", "json"},
		{"verify", "-f", workerMC, "--base", r.base, "--image", pushed, "--quiet", "--format", "json"},
	} {
		code, stdout, stderr := r.run(append(append(args, r.imageArgs()...), r.creds()...)...)
		if code != 0 || !json.Valid([]byte(stdout)) {
			t.Errorf("%v: exit %d, JSON %v\n%s", args, code, json.Valid([]byte(stdout)), stderr)
		}
	}
}

// TestRegistryFailures: every failure to reach an image is one line that
// names the reference and the cause, exit 2, no panic, and nothing at the
// destination.
func TestRegistryFailures(t *testing.T) {
	r := newRegEnv(t, testbase.Options{})
	pass := registrytest.User + ":" + registrytest.Password
	tests := []struct {
		name, base, out string
		flags           []string
		want            []string
	}{
		{"wrong password", r.base, "ci/wrong-password", []string{"--cert-dir", r.reg.CertDir, "--creds", registrytest.User + ":wrong"},
			[]string{"opening " + r.base + ": ", "authentication required"}},
		{"missing tag", r.ref("os/base:nope"), "ci/missing-tag", r.creds(),
			[]string{"opening " + r.ref("os/base:nope") + ": ", "manifest unknown"}},
		{"untrusted CA", r.base, "ci/untrusted", []string{"--creds", pass},
			[]string{"opening " + r.base + ": ", "x509: certificate signed by unknown authority"}},
		{"push without credentials", r.base, "ci/no-credentials", []string{"--cert-dir", r.reg.CertDir, "--src-creds", pass},
			[]string{"writing " + r.ref("ci/no-credentials:latest") + ": ", "authentication required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"build", "--quiet", "--base", tt.base, "-o", r.ref(tt.out + ":latest"), "-f", workerMC}, r.imageArgs()...)
			code, stdout, stderr := r.run(append(args, tt.flags...)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != exitInput || stdout != "" || len(lines) != 1 || strings.Contains(stderr, "panic") {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line", code, stdout, stderr)
			}
			t.Log(lines[0])
			for _, w := range tt.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error %q does not say %q", lines[0], w)
				}
			}
			if tags, err := r.reg.Tags(tt.out); err != nil || len(tags) != 0 {
				t.Errorf("destination %s has tags %v (%v), want none", tt.out, tags, err)
			}
		})
	}
}

// TestRegistryRetry starts a build while the registry is down and
// restarts the registry a moment later: --retry-times carries the build
// across.
func TestRegistryRetry(t *testing.T) {
	r := newRegEnv(t, testbase.Options{})
	r.reg.Stop()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(1500 * time.Millisecond)
		r.reg.Start()
	}()
	code, _, stderr := r.buildWith(r.ref("ci/retried:latest"), append(r.creds(), "--quiet", "--retry-times", "5", "--retry-delay", "1s")...)
	<-restarted
	if code != 0 {
		t.Fatalf("build across a registry restart: exit %d\n%s", code, stderr)
	}
	if code, _, _ := r.buildWith(r.ref("ci/not-retried:latest"), append(r.creds(), "--quiet", "--retry-times", "2", "--retry-delay", "10ms", "--creds", "x:y")...); code != exitInput {
		t.Errorf("wrong credentials with retries: exit %d, want 2 (not retried into success)", code)
	}
}

var uploadedRE = regexp.MustCompile(`: uploaded (\d+) bytes \(.*\) in (\d+) blob\(s\); (\d+) blob\(s\) already there or mounted`)

// TestColdBuildMountsBaseLayers: with an empty cache, a build from one
// repository into another of the same registry uploads only the new layers
// and the config; the base's layers are mounted, never uploaded again, and
// mcbake says how many bytes it uploaded.
func TestColdBuildMountsBaseLayers(t *testing.T) {
	r := newRegEnv(t, testbase.Options{Size: &testbase.SizeOptions{TotalBytes: 8 << 20, Files: 400, Layers: 2}})
	before, err := r.reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	// The base's index, which a build publishes in its destination, is
	// left out: TestPublishedIndexColdBuild counts it.
	code, stdout, stderr := r.buildWith(r.ref("ci/cold:latest"), append(r.creds(), "--no-publish-index")...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	after, err := r.reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	uploaded := after.Uploaded[len(before.Uploaded):]
	m := readRegistryManifest(t, r, "ci/cold@"+strings.TrimSpace(stdout))
	base := len(m.Layers) - newLayers
	newBlobs := []string{m.Config.Digest}
	wantBytes := m.Config.Size
	for _, l := range m.Layers[base:] {
		newBlobs = append(newBlobs, l.Digest)
		wantBytes += l.Size
	}
	slices.Sort(uploaded)
	slices.Sort(newBlobs)
	if !slices.Equal(uploaded, newBlobs) {
		t.Errorf("uploaded %v, want only the config and the new layers %v", uploaded, newBlobs)
	}
	var baseBytes int64
	for _, l := range m.Layers[:base] {
		baseBytes += l.Size
		if !slices.Contains(after.Mounted, l.Digest) {
			t.Errorf("base layer %s was not mounted", l.Digest)
		}
	}
	notAsked(t, m, before, after)
	got := uploadedRE.FindStringSubmatch(stderr)
	if got == nil || got[1] != strconv.FormatInt(wantBytes, 10) || got[2] != strconv.Itoa(len(newBlobs)) {
		t.Errorf("upload report %q, want %d bytes in %d blobs\n%s", got, wantBytes, len(newBlobs), stderr)
	}
	t.Logf("cold build: uploaded %d bytes; the base's %d layers (%d bytes) were mounted", wantBytes, base, baseBytes)
	// containers/image's blob-info cache, which its copy opens, is in
	// SQLite's WAL mode (image.walBlobInfoCache): bytes 18 and 19 of the
	// database's header are 2.
	if b, err := os.ReadFile(filepath.Join(r.cache, "blobinfo", "blob-info-cache-v1.sqlite")); err != nil || len(b) < 100 || b[18] != 2 || b[19] != 2 {
		t.Errorf("the blob-info cache database: %v; want it in WAL mode", err)
	}
	// Again into the same repository: the layers are there, only the
	// config is written again.
	code, _, stderr = r.buildWith(r.ref("ci/cold:again"), r.creds()...)
	if got := uploadedRE.FindStringSubmatch(stderr); code != 0 || got == nil || got[3] != strconv.Itoa(len(m.Layers)) {
		t.Errorf("rebuild: exit %d, report %q; want every layer (%d) already there\n%s", code, got, len(m.Layers), stderr)
	}
}

// newLayers is how many layers a build with the revert guard adds: the
// guard's and the MachineConfigs'.
const newLayers = 2

// notAsked: the build that pushed m mounted each base layer with one
// request: neither the mounts nor the copy asked a repository whether it
// has the layer (image.crossMount, image.withPresent), between before and
// after.
func notAsked(t *testing.T, m registryManifest, before, after registrytest.Requests) {
	t.Helper()
	for _, l := range m.Layers[:len(m.Layers)-newLayers] {
		for _, c := range after.Checked[len(before.Checked):] {
			if strings.HasSuffix(c, "@"+l.Digest) {
				t.Errorf("asked %s about base layer %s, which the build mounted", c, l.Digest)
			}
		}
	}
}

type registryManifest struct {
	MediaType string
	Config    struct {
		Digest string
		Size   int64
	}
	Layers []struct {
		Digest string
		Size   int64
	}
	Manifests []struct {
		Digest   string
		Platform struct{ OS, Architecture string }
	}
}

func readRegistryManifest(t *testing.T, r *regEnv, repo string) registryManifest {
	t.Helper()
	raw := r.skopeo(t, "inspect", "--raw", "--cert-dir", r.reg.CertDir, "--creds", registrytest.User+":"+registrytest.Password, r.ref(repo))
	var m registryManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if d := digest.FromBytes(raw).String(); strings.Contains(repo, "@") && !strings.HasSuffix(repo, d) {
		t.Fatalf("registry served manifest %s for %s", d, repo)
	}
	return m
}

// writeTestFile writes b to a new file under t's temporary directory.
func writeTestFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRegistrySignedPush signs the pushed image with a sigstore key: the
// signature is in the registry as a sigstore attachment (fetched with
// skopeo, checked against the public key here: Debian's skopeo is built
// with sigstore verification disabled), and mcbake (containers/image)
// accepts the image under a policy.json that requires that key's
// signature while refusing an unsigned one. GPG signing is refused clearly
// in this build.
func TestRegistrySignedPush(t *testing.T) {
	r := newRegEnv(t, testbase.Options{})
	private, public, passphrase, registriesD := sigstoreSetup(t, r.reg.Host)
	require := `[{"type": "sigstoreSigned", "keyPath": "` + public + `"}]`
	policy := writeTestFile(t, "policy.json", []byte(`{"default": [{"type": "reject"}], "transports": {
		"docker": {"`+r.reg.Host+`/os": [{"type": "insecureAcceptAnything"}], "`+r.reg.Host+`/ci": `+require+`},
		"oci": {"": [{"type": "insecureAcceptAnything"}]}}}`))
	flags := append(r.creds(), "--quiet", "--registries.d", registriesD,
		"--sign-by-sigstore-private-key", private, "--sign-passphrase-file", passphrase)
	if code, _, stderr := r.buildWith(r.ref("ci/signed:latest"), flags...); code != 0 {
		t.Fatalf("signed build: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := r.buildWith(r.ref("ci/unsigned:latest"), append(r.creds(), "--quiet")...); code != 0 {
		t.Fatalf("unsigned build: exit %d\n%s", code, stderr)
	}
	checkSigstoreAttachment(t, r, "ci/signed", public)
	read := func(repo string) (int, string) {
		args := append([]string{"manifest", r.ref(repo), "--signature-policy", policy, "--registries.d", registriesD,
			"--cache-dir", r.cache, "--registries-conf", r.reg.EmptyRegistriesConf()}, r.creds()...)
		code, _, stderr := r.run(args...)
		return code, stderr
	}
	if code, stderr := read("ci/signed:latest"); code != 0 {
		t.Errorf("mcbake manifest of the signed image: exit %d\n%s", code, stderr)
	}
	if code, stderr := read("ci/unsigned:latest"); code != exitInput || !strings.Contains(stderr, "signature policy") {
		t.Errorf("mcbake manifest of the unsigned image: exit %d, stderr %q; want 2 and a policy refusal", code, stderr)
	}
	code, _, stderr := r.buildWith(r.ref("ci/gpg:latest"), append(r.creds(), "--quiet", "--sign-by", "ABCDEF0123456789")...)
	if code != exitInput || !strings.Contains(stderr, "signing is not supported") {
		t.Errorf("--sign-by: exit %d, stderr %q; want 2 and containers/image's refusal", code, stderr)
	}
	if tags, _ := r.reg.Tags("ci/gpg"); len(tags) != 0 {
		t.Errorf("a refused GPG signing left tags %v", tags)
	}
}

// sigstoreSetup makes a sigstore key pair with a passphrase, and a
// registries.d directory that keeps signatures as sigstore attachments in
// the registry at host: the files of the private key, public key and
// passphrase, and the directory.
func sigstoreSetup(t *testing.T, host string) (private, public, passphrase, registriesD string) {
	t.Helper()
	keys, err := sigstore.GenerateKeyPair([]byte("key passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	private = writeTestFile(t, "cosign.key", keys.PrivateKey)
	public = writeTestFile(t, "cosign.pub", keys.PublicKey)
	passphrase = writeTestFile(t, "passphrase", []byte("key passphrase\n"))
	registriesD = t.TempDir()
	writeFileIn(t, registriesD, "local.yaml", "docker:\n  "+host+":\n    use-sigstore-attachments: true\n")
	return private, public, passphrase, registriesD
}

func writeFileIn(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkSigstoreAttachment fetches the sigstore signature of repo:latest
// with skopeo (the sha256-DIGEST.sig attachment) and checks it: its payload
// names the image's manifest digest, and its signature verifies with the
// public key.
func checkSigstoreAttachment(t *testing.T, r *regEnv, repo, publicKey string) {
	t.Helper()
	pass := registrytest.User + ":" + registrytest.Password
	var img struct{ Digest digest.Digest }
	if err := json.Unmarshal(r.skopeo(t, "inspect", "--cert-dir", r.reg.CertDir, "--creds", pass, r.ref(repo+":latest")), &img); err != nil {
		t.Fatal(err)
	}
	checkSigstoreAttachmentOf(t, r, repo, img.Digest, publicKey)
}

// checkSigstoreAttachmentOf checks the sigstore signature of repo@d as
// checkSigstoreAttachment does.
func checkSigstoreAttachmentOf(t *testing.T, r *regEnv, repo string, d digest.Digest, publicKey string) {
	t.Helper()
	pass := registrytest.User + ":" + registrytest.Password
	img := struct{ Digest digest.Digest }{d}
	dir := filepath.Join(t.TempDir(), "sig")
	sigRef := r.ref(repo + ":" + img.Digest.Algorithm().String() + "-" + img.Digest.Encoded() + ".sig")
	r.skopeo(t, "copy", "--quiet", "--insecure-policy", "--src-cert-dir", r.reg.CertDir, "--src-creds", pass, sigRef, "dir:"+dir)
	var m struct {
		Layers []struct {
			Digest      digest.Digest
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "manifest.json")), &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("signature attachment manifest: %v, %d layers; want one", err, len(m.Layers))
	}
	payload := mustRead(t, filepath.Join(dir, m.Layers[0].Digest.Encoded()))
	var p struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			}
		}
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Critical.Image.Digest != img.Digest.String() {
		t.Errorf("signature payload names %q (%v), want %s", p.Critical.Image.Digest, err, img.Digest)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Layers[0].Annotations["dev.cosignproject.cosign/signature"])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(mustRead(t, publicKey))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if key, ok := pub.(*ecdsa.PublicKey); !ok || !ecdsa.VerifyASN1(key, sum[:], sig) {
		t.Errorf("the signature of %s does not verify with the public key", repo)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRegistryMultiPlatformIndex builds --platform all from a
// two-platform base in the registry: one layered image per platform under
// one OCI index, the same digest on a rebuild, each image readable by
// platform; a comma list into an OCI layout gives the same index.
func TestRegistryMultiPlatformIndex(t *testing.T) {
	r := newRegEnv(t, testbase.Options{Platforms: []string{"linux/amd64", "linux/arm64"}})
	out := r.ref("ci/multi:latest")
	stand := neutralGuard(t, t.TempDir()) // a guard for both architectures
	code, stdout, stderr := r.buildWith(out, append(r.creds(), "--platform", "all", "--guard-binary", stand)...)
	if code != 0 {
		t.Fatalf("build --platform all: exit %d\n%s", code, stderr)
	}
	first := strings.TrimSpace(stdout)
	os.RemoveAll(r.cache) // a cold rebuild elsewhere gives the same index
	code, stdout, stderr = r.buildWith(r.ref("ci/multi:again"), append(r.creds(), "--platform", "all", "--quiet", "--guard-binary", stand)...)
	if code != 0 || strings.TrimSpace(stdout) != first {
		t.Fatalf("rebuild: exit %d, digest %q, want %s\n%s", code, strings.TrimSpace(stdout), first, stderr)
	}
	idx := readRegistryManifest(t, r, "ci/multi@"+first)
	if idx.MediaType != "application/vnd.oci.image.index.v1+json" || len(idx.Manifests) != 2 ||
		idx.Manifests[0].Platform.Architecture != "amd64" || idx.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("pushed index %+v, want an OCI index of amd64 then arm64", idx)
	}
	for _, platform := range []string{"linux/amd64", "linux/arm64"} {
		args := append(append([]string{"manifest", "--summary", "--platform", platform, out}, r.imageArgs()...), r.creds()...)
		if code, _, stderr := r.run(args...); code != 0 {
			t.Errorf("manifest --platform %s: exit %d\n%s", platform, code, stderr)
		}
	}
	layout := "oci:" + filepath.Join(r.dir, "multi") + ":latest"
	code, stdout, stderr = r.buildWith(layout, append(r.creds(), "--platform", "linux/amd64,linux/arm64", "--quiet", "--guard-binary", stand)...)
	if code != 0 || strings.TrimSpace(stdout) != first {
		t.Errorf("--platform list into an OCI layout: exit %d, digest %q, want %s\n%s", code, strings.TrimSpace(stdout), first, stderr)
	}
	if code, _, stderr := r.buildWith(layout, append(r.creds(), "--platform", "all", "--engine", "buildah")...); code != exitInput || !strings.Contains(stderr, "--engine append") {
		t.Errorf("--platform all --engine buildah: exit %d, stderr %q; want 2", code, stderr)
	}
}

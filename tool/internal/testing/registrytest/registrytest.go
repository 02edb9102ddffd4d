// Package registrytest runs a real TLS registry for tests.
//
// It runs Debian's docker-registry (distribution v2) on 127.0.0.1 only, on a
// free port, with TLS from a self-signed CA and htpasswd authentication, all
// generated with Go's crypto. Each test gets its own registry, stopped by
// its PID when the test ends. Tests skip when docker-registry is not
// installed (hack/test-deps.sh installs it as root).
package registrytest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Binary is the registry program Debian's docker-registry package installs.
const Binary = "docker-registry"

// Credentials of the registry's one user.
const (
	User     = "mcbake"
	Password = "s3cret-for-tests"
)

// Registry is a running docker-registry.
type Registry struct {
	// Host is 127.0.0.1:PORT, the registry part of references.
	Host string
	// CertDir holds ca.crt, the CA that signed the server certificate: a
	// --cert-dir.
	CertDir string
	// CertsD is a containers-certs.d(5) tree (CertsD/HOST/ca.crt).
	CertsD string
	dir    string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	t      testing.TB
}

// Start starts a registry for t and stops it when t ends. It skips t when
// docker-registry is not installed.
func Start(t testing.TB) *Registry {
	t.Helper()
	if _, err := exec.LookPath(Binary); err != nil {
		t.Skipf("%s not installed (make test installs it as root): skipping the registry test", Binary)
	}
	dir := t.TempDir()
	r := &Registry{dir: dir, CertDir: filepath.Join(dir, "ca"), log: filepath.Join(dir, "registry.log"), t: t}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)
	r.CertsD = filepath.Join(dir, "certs.d")
	if err := r.setup(); err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// setup writes the CA, the server certificate, the htpasswd file and the
// configuration.
func (r *Registry) setup() error {
	for _, d := range []string{r.CertDir, filepath.Join(r.CertsD, r.Host), filepath.Join(r.dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	caPEM, certPEM, keyPEM, err := certificates()
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(r.CertDir, "ca.crt"):            caPEM,
		filepath.Join(r.CertsD, r.Host, "ca.crt"):     caPEM,
		filepath.Join(r.dir, "server.crt"):            certPEM,
		filepath.Join(r.dir, "server.key"):            keyPEM,
		filepath.Join(r.dir, "htpasswd"):              []byte(User + ":" + string(hash) + "\n"),
		filepath.Join(r.dir, "config.yml"):            []byte(r.config()),
		filepath.Join(r.dir, "empty-registries.conf"): nil,
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registry) config() string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  formatter: text
storage:
  filesystem:
    rootdirectory: %[1]s/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %[2]s
  tls:
    certificate: %[1]s/server.crt
    key: %[1]s/server.key
auth:
  htpasswd:
    realm: mcbake-test
    path: %[1]s/htpasswd
`, r.dir, r.Host)
}

// Start (re)starts the registry process on the same port and storage, and
// waits until it answers.
func (r *Registry) Start() {
	r.t.Helper()
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(Binary, "serve", filepath.Join(r.dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// The registry dies with the test binary even if Stop never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting %s: %v", Binary, err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(r.exited)
	if err := r.waitReady(10 * time.Second); err != nil {
		r.Stop()
		r.t.Fatalf("%s did not come up: %v\n%s", Binary, err, r.Log())
	}
}

// Stop stops the registry by its PID and waits for it to exit; stopping a
// stopped registry does nothing.
func (r *Registry) Stop() {
	if r.cmd == nil {
		return
	}
	_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	}
	r.cmd = nil
}

func (r *Registry) waitReady(timeout time.Duration) error {
	client, err := r.client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get("https://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		select {
		case <-r.exited:
			return errors.New("the registry exited")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

func (r *Registry) client() (*http.Client, error) {
	ca, err := os.ReadFile(filepath.Join(r.CertDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, nil
}

// Log returns what the registry printed.
func (r *Registry) Log() string {
	b, _ := os.ReadFile(r.log)
	return string(b)
}

// EmptyRegistriesConf is an empty registries.conf, so that the host's
// cannot leak into a test.
func (r *Registry) EmptyRegistriesConf() string { return filepath.Join(r.dir, "empty-registries.conf") }

// AuthFile writes a containers-auth.json(5) file for the registry with
// user and password, and returns its path.
func (r *Registry) AuthFile(t testing.TB, user, password string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	b, err := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "auth-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Tags lists the tags of repo, through the registry's API; a missing
// repository has none.
func (r *Registry) Tags(repo string) ([]string, error) {
	client, err := r.client()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+r.Host+"/v2/"+repo+"/tags/list", nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(User, Password)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing tags of %s: %s", repo, resp.Status)
	}
	var v struct {
		Tags []string `json:"tags"`
	}
	return v.Tags, json.NewDecoder(resp.Body).Decode(&v)
}

// Requests is what the registry served: blobs uploaded (their digests),
// blobs mounted from another repository, blobs downloaded (REPO@DIGEST,
// once per GET that sent content), and blobs asked about (REPO@DIGEST,
// once per HEAD), per the registry's own log.
type Requests struct {
	Uploaded, Mounted, Downloaded, Checked []string
}

var (
	uploadRE = regexp.MustCompile(`"PUT /v2/\S+/blobs/uploads/\S*[?&]digest=(sha256(?::|%3A)[0-9a-f]{64})`)
	getRE    = regexp.MustCompile(`"GET /v2/(\S+)/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" (?:200|206) `)
	headRE   = regexp.MustCompile(`"HEAD /v2/(\S+)/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" `)
	mountRE  = regexp.MustCompile(`"POST /v2/\S+/blobs/uploads/\?\S*mount=(sha256(?::|%3A)[0-9a-f]{64})\S* HTTP/[0-9.]+" 201`)
)

// Requests reads the registry's access log: what it has served since
// it was first started.
func (r *Registry) Requests() (Requests, error) {
	f, err := os.Open(r.log)
	if err != nil {
		return Requests{}, err
	}
	defer f.Close()
	var out Requests
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := uploadRE.FindStringSubmatch(line); m != nil && strings.Contains(line, `" 201 `) {
			out.Uploaded = append(out.Uploaded, strings.Replace(m[1], "%3A", ":", 1))
		}
		if m := getRE.FindStringSubmatch(line); m != nil {
			out.Downloaded = append(out.Downloaded, m[1]+"@"+m[2])
		}
		if m := headRE.FindStringSubmatch(line); m != nil {
			out.Checked = append(out.Checked, m[1]+"@"+m[2])
		}
		if m := mountRE.FindStringSubmatch(line); m != nil {
			out.Mounted = append(out.Mounted, strings.Replace(m[1], "%3A", ":", 1))
		}
	}
	return out, sc.Err()
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// certificates makes a CA and a server certificate for 127.0.0.1 signed
// by it; keys are ECDSA P-256.
func certificates() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcbake test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// Push copies a local image (oci:DIR:TAG and the like) to
// docker://HOST/repo with skopeo, as a CI system that publishes bases
// would, and returns the reference.
func (r *Registry) Push(t testing.TB, src, repo string, extra ...string) string {
	t.Helper()
	dest := "docker://" + r.Host + "/" + repo
	args := append([]string{"--registries-conf", r.EmptyRegistriesConf(), "copy", "--quiet", "--insecure-policy",
		"--dest-cert-dir", r.CertDir, "--dest-creds", User + ":" + Password}, extra...)
	out, err := exec.Command("skopeo", append(args, src, dest)...).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo copy %s %s: %v\n%s", src, dest, err, out)
	}
	return dest
}

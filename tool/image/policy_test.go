package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/signature"
)

const (
	acceptPolicy = `{"default":[{"type":"insecureAcceptAnything"}]}`
	rejectPolicy = `{"default":[{"type":"reject"}]}`
)

func TestOpenSignaturePolicy(t *testing.T) {
	opts := testEnv(t) // HOME is empty: no user policy
	dir := t.TempDir()
	base, _ := baseFixture(t, dir)
	accept, reject := filepath.Join(dir, "accept.json"), filepath.Join(dir, "reject.json")
	writeFile(t, accept, []byte(acceptPolicy))
	writeFile(t, reject, []byte(rejectPolicy))
	system := filepath.Join(dir, "etc-containers-policy.json")
	saved := systemPolicyPath
	t.Cleanup(func() { systemPolicyPath = saved })

	tests := []struct {
		name      string
		insecure  bool
		file      string
		installed string // content of the system policy; "" = none
		wantErr   string // substring; "" = success
		noPolicy  bool
	}{
		{name: "insecure", insecure: true},
		{name: "file accepts", file: accept},
		{name: "file rejects", file: reject, wantErr: "rejected"},
		{name: "installed accepts", installed: acceptPolicy},
		{name: "installed rejects", installed: rejectPolicy, wantErr: "rejected"},
		{name: "file wins over installed", file: accept, installed: rejectPolicy},
		{name: "none", wantErr: "pass --insecure-policy or --signature-policy FILE", noPolicy: true},
		{name: "both flags", insecure: true, file: accept, wantErr: "mutually exclusive"},
		{name: "missing file", file: filepath.Join(dir, "absent.json"), wantErr: "absent.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			systemPolicyPath = filepath.Join(dir, "no-such-policy.json")
			if tt.installed != "" {
				writeFile(t, system, []byte(tt.installed))
				systemPolicyPath = system
			}
			o := opts
			o.InsecurePolicy, o.SignaturePolicy = tt.insecure, tt.file
			im, err := Open(context.Background(), base, o)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open = %v, want success", err)
				}
				if err := im.Close(); err != nil {
					t.Error(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open error = %v, want it to mention %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrNoPolicy) != tt.noPolicy {
				t.Errorf("errors.Is(%v, ErrNoPolicy) = %v, want %v", err, !tt.noPolicy, tt.noPolicy)
			}
		})
	}
}

func TestUserPolicyIsFound(t *testing.T) {
	opts := testEnv(t)
	base, _ := baseFixture(t, t.TempDir())
	saved := systemPolicyPath
	t.Cleanup(func() { systemPolicyPath = saved })
	systemPolicyPath = filepath.Join(t.TempDir(), "absent.json")
	userDir := filepath.Join(os.Getenv("HOME"), ".config", "containers")
	if err := os.MkdirAll(userDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(userDir, "policy.json"), []byte(rejectPolicy))
	opts.InsecurePolicy = false
	if _, err := Open(context.Background(), base, opts); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("Open with a rejecting $HOME policy: error = %v, want a rejection", err)
	}
}

// TestIndexPolicyProbe: a policy that decides without reading the image
// (insecureAcceptAnything, reject) is evaluated on the artifact's
// reference alone; one that reads it (signedBy) is not decided by the
// probe, so checkIndexPolicy evaluates it on the image.
func TestIndexPolicyProbe(t *testing.T) {
	ref, err := docker.ParseReference("//registry.example/ci/index@" + digest.FromString("artifact").String())
	if err != nil {
		t.Fatal(err)
	}
	signedBy, err := signature.NewPRSignedByKeyPath(signature.SBKeyTypeGPGKeys, "/nonexistent.gpg", signature.NewPRMMatchRepoDigestOrExact())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		req      signature.PolicyRequirement
		read     bool
		accepted bool
	}{
		{"insecureAcceptAnything", signature.NewPRInsecureAcceptAnything(), false, true},
		{"reject", signature.NewPRReject(), false, false},
		{"signedBy", signedBy, true, false},
	} {
		pc, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{tt.req}})
		if err != nil {
			t.Fatal(err)
		}
		probe := &policyProbe{ref: ref}
		err = checkPolicy(context.Background(), pc, probe)
		if probe.read != tt.read || !tt.read && (err == nil) != tt.accepted {
			t.Errorf("%s: read %v, err %v; want read %v, accepted %v", tt.name, probe.read, err, tt.read, tt.accepted)
		}
		_ = pc.Destroy()
	}
}

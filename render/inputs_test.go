package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderGzipOverriddenByPlain: an earlier MachineConfig's gzip file
// overridden by a later plain one renders plain, as the MCO merges it
// (it used to fail with "invalid gzip content").
func TestRenderGzipOverriddenByPlain(t *testing.T) {
	gzipped := mcDoc("00-gzip", `"storage":{"files":[{"path":"/etc/x","contents":{"compression":"gzip","source":"`+base64URL(gz(t, []byte("zipped\n")))+`"}}]}`)
	plain := mcDoc("99-plain", `"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,plain%0A"}}]}`)
	res, err := renderDocs(t, nil, plain, gzipped)
	if err != nil {
		t.Fatalf("Render(gzip, then plain) = %v", err)
	}
	if got, _ := content(res, "/etc/x"); got != "plain\n" {
		t.Errorf("Render(gzip, then plain) /etc/x = %q, want %q", got, "plain\n")
	}
	res, err = renderDocs(t, nil, gzipped)
	if err != nil {
		t.Fatalf("Render(gzip) = %v", err)
	}
	if got, _ := content(res, "/etc/x"); got != "zipped\n" {
		t.Errorf("Render(gzip) /etc/x = %q, want %q", got, "zipped\n")
	}
}

// TestRenderCustomPool: a custom pool's own MachineConfig wins over a
// worker one with the same file, whatever their names.
func TestRenderCustomPool(t *testing.T) {
	worker := strings.Replace(mcDoc("99-worker", `"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,worker"}}]}`),
		`"metadata":{`, `"metadata":{"labels":{"machineconfiguration.openshift.io/role":"worker"},`, 1)
	infra := strings.Replace(mcDoc("10-infra", `"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,infra"}}]}`),
		`"metadata":{`, `"metadata":{"labels":{"machineconfiguration.openshift.io/role":"infra"},`, 1)
	res, err := renderDocs(t, nil, worker, infra)
	if err != nil {
		t.Fatalf("Render(worker, infra) = %v", err)
	}
	if got, _ := content(res, "/etc/x"); got != "infra" {
		t.Errorf("Render(99-worker, 10-infra) /etc/x = %q, want the infra pool's own %q", got, "infra")
	}
}

// TestManifestMarksCertificateWriterFiles: the files the certificate
// writer manages are marked in the manifest, every other entry is not:
// not the user CA bundle, which the MCD writes and validates as any file.
func TestManifestMarksCertificateWriterFiles(t *testing.T) {
	res, err := renderDocs(t, nil, mcDoc("00-ca", `"storage":{"files":[`+
		`{"path":"/etc/kubernetes/kubelet-ca.crt","contents":{"source":"data:,ca"}},`+
		`{"path":"/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem","contents":{"source":"data:,cloud"}},`+
		`{"path":"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt","contents":{"source":"data:,user"}},`+
		`{"path":"/etc/mco/internal-registry-pull-secret.json","contents":{"source":"data:,%7B%7D"}},`+
		`{"path":"/etc/kubernetes/kubelet.conf","contents":{"source":"data:,conf"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range res.Manifest(nil).Entries {
		if e.Managed != "" {
			got[e.Path] = e.Managed
		}
	}
	want := map[string]string{
		"/etc/kubernetes/kubelet-ca.crt":                                             "certificate-writer",
		"/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem": "certificate-writer",
		"/etc/mco/internal-registry-pull-secret.json":                                "certificate-writer",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Manifest() managed entries (-want +got):\n%s", diff)
	}
}

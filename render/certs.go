package render

// certificateWriterPaths are the files the machine-config-daemon's
// certificate writer keeps up to date on a node from the cluster's
// ControllerConfig (rotated CAs, the merged pull secret). The daemon
// neither writes them on an update nor validates them on disk, so nothing
// may roll them back to what a MachineConfig once said (docs/design.md,
// "Files the MCD does not manage on update"). The user CA bundle is not
// one of them: the MCD writes and validates it from the MachineConfig,
// as any file.
var certificateWriterPaths = map[string]bool{
	"/etc/kubernetes/kubelet-ca.crt":                                             true,
	"/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem": true,
	"/etc/mco/internal-registry-pull-secret.json":                                true,
}

// CertificateWriterManages reports whether the file at p is one the
// machine-config-daemon's certificate writer manages on the node.
func CertificateWriterManages(p string) bool { return certificateWriterPaths[p] }

// Package verify is mcbake's pre-flight gate for CI.
//
// Rules with stable IDs (MCB001…) check MachineConfigs, the base image
// they are baked into and the layered image built from them; findings
// name the rule, the MachineConfig file, line and Ignition field at
// fault; reports come in the formats CI systems consume (text, JSON,
// JUnit XML, SARIF 2.1.0).
//
// Run gathers the inputs (files, images) and checks them; every finding is
// reported, not only the first. A Report says whether it fails a
// threshold; the command turns that into its exit code. Diff opens a
// layered image (or reads its manifest) and a base image and predicts a
// revert with package revert.
package verify

import (
	"strings"

	"github.com/mcbake/mcbake/tool/guard"
)

// Severity is how serious a finding is.
type Severity string

// Severities, most serious first.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// rank orders severities: a higher rank is more serious.
func (s Severity) rank() int {
	switch s {
	case Error:
		return 3
	case Warning:
		return 2
	case Info:
		return 1
	}
	return 0
}

// Needs says which inputs a rule needs besides the MachineConfigs.
type Needs string

// What rules need.
const (
	NeedsNothing      Needs = ""
	NeedsBase         Needs = "base"
	NeedsImage        Needs = "image"
	NeedsBaseAndImage Needs = "base+image"
)

// Rule is one check.
type Rule struct {
	// ID is stable across releases (MCB001…); Name is a short slug.
	ID, Name string
	// Severity is the default severity of the rule's findings.
	Severity Severity
	Needs    Needs
	// Summary is one line; Description one paragraph; Fix a hint.
	Summary, Description, Fix string
}

// Rule IDs.
const (
	RuleUnsupportedIgnition = "MCB001"
	RuleConflict            = "MCB002"
	RuleUsrContent          = "MCB003"
	RuleVarContent          = "MCB004"
	RuleDroppedContent      = "MCB005"
	RuleFileDirClash        = "MCB006"
	RuleRevertClobber       = "MCB007"
	RuleManifestDrift       = "MCB008"
	RuleStaleImage          = "MCB009"
	RuleUnitNotFound        = "MCB010"
	RuleUnknownOwner        = "MCB011"
	RuleImageIsBase         = "MCB012"
	RuleEnabledNoInstall    = "MCB013"
	RuleRenderFailure       = "MCB014"
	RuleBaseMismatch        = "MCB015"
	RuleKernelArguments     = "MCB016"
	RuleExtensions          = "MCB017"
	RuleKernelType          = "MCB018"
	RuleFIPS                = "MCB019"
	RuleOSImageURL          = "MCB020"
	RuleStorageLayout       = "MCB021"
	RuleKubeconfigMode      = "MCB022"
	RuleUnusedField         = "MCB023"
	RuleEnablementCheck     = "MCB024"
	RuleRevertGuard         = "MCB025"
	RuleContentMismatch     = "MCB026"
)

var rules = []Rule{
	{ID: RuleUnsupportedIgnition, Name: "unsupported-ignition", Severity: Error,
		Summary: "Ignition content the machine-config-daemon does not apply or mcbake refuses",
		Description: "The MachineConfig holds Ignition content that the machine-config-daemon does not apply, or that cannot be baked offline: " +
			"append; remote sources (http, https, s3, gs, tftp: the build is offline); passwd users other than core, and core fields other than sshAuthorizedKeys and passwordHash; " +
			"passwd groups; modes above 0777; owner ids outside 0 to 4294967294; a file at /run/machine-config-daemon-force; compression other than none or gzip; " +
			"paths that are not absolute and clean; link targets that escape the root; content that does not decode (a bad data URL, bad gzip, gzip that expands past 64 MiB, " +
			"a verification hash that does not match); a file with neither contents.source nor overwrite (the MCO's merge sets overwrite: true on it, and Ignition's validation then fails: " +
			"overwrite must be false if source is unspecified); and Ignition configs that do not parse or validate. Each problem is one finding at the field's JSON path; mcbake build refuses the same content.",
		Fix: "Remove the field, or inline the content as a data: URL (gzip-compressed when large); manage users and groups outside MachineConfigs."},
	{ID: RuleConflict, Name: "machineconfig-conflict", Severity: Warning,
		Summary: "two MachineConfigs define the same path or unit differently",
		Description: "Two MachineConfigs define the same file, directory or link path, or the same systemd unit, differently. They merge as the Machine Config Operator merges them: " +
			"in its merge order (the worker-role MachineConfigs first, then a custom pool's own, each by name), the later one overrides every field it sets, so what the earlier one set there is silently lost. " +
			"The finding sits at the winner and names the loser. " +
			"Identical definitions are not reported; definitions of different kinds at one path (a file and a directory) cannot merge at all and are reported by MCB014.",
		Fix: "Keep one definition, or rename (or relabel) the MachineConfigs so that the one meant to win merges last."},
	{ID: RuleUsrContent, Name: "usr-content", Severity: Error,
		Summary: "content outside /etc and /var: lost on revert, a node cannot rewrite it",
		Description: "A file, directory or link lands outside /etc and /var once its parent directories are resolved through the base image's symlinks " +
			"(without --base, through the RHCOS symlinks /usr/local, /opt, /home, /root, /srv and /mnt into /var): under /usr, or another path that ostree replaces on every deployment. " +
			"A revert to the base replaces it with the base's version or removes it, and a node cannot rewrite it afterwards because /usr is read-only.",
		Fix: "Move configuration to /etc, programs to /usr/local (backed by /var on RHCOS), or ship the content in a package or in the base image."},
	{ID: RuleVarContent, Name: "var-content", Severity: Info,
		Summary: "content under /var (or RHCOS's /var-backed paths) never reaches an existing node from the image",
		Description: "A file, directory or link lands under /var, directly or through the RHCOS /var-backed paths (/usr/local, /opt, /home, /root, /srv, /mnt; with --base, through the base's own symlinks). " +
			"ostree applies an image's /var only when a node is first provisioned: the baked copy never reaches an existing node, and a revert never removes it. " +
			"The machine-config-daemon still writes the path when it applies the MachineConfig, so existing nodes get it from the daemon, not from the image. " +
			"core's SSH keys (under /home/core) are not reported: the daemon writes them on every update by design. " +
			"It is information by default, since every node still gets the content (the MCO's own rendered configs have scripts under /usr/local/bin); --severity MCB004=warning makes it a warning.",
		Fix: "Rely on the daemon, not the image, for this content; move configuration the image must carry to /etc; create runtime state with systemd-tmpfiles or a unit."},
	{ID: RuleDroppedContent, Name: "dropped-content", Severity: Error,
		Summary: "content under /run, /tmp, /proc, /sys or /dev is dropped on deploy",
		Description: "A file, directory or link lands under /run, /tmp, /proc, /sys or /dev. ostree-container import drops these directories, " +
			"so the content never reaches a node from the image; on a running node they are volatile or provided by the kernel.",
		Fix: "Create runtime files at boot with systemd-tmpfiles (a file under /etc/tmpfiles.d) or with a unit."},
	{ID: RuleFileDirClash, Name: "file-directory-clash", Severity: Error, Needs: NeedsBase,
		Summary: "a file where the base has a directory, or the reverse",
		Description: "The MachineConfig writes a file, link, unit file or drop-in where the base image has a directory, a directory (or a unit's drop-in directory) where the base has a file or link to a non-directory, " +
			"or a path whose parent is a file in the base (after resolving the base's symlinks). ostree cannot merge a file over a directory or the reverse: " +
			"finalizing the deployment fails, and mcbake build refuses it.",
		Fix: "Choose another path, or change the base so that the types agree."},
	{ID: RuleRevertClobber, Name: "revert-clobber", Severity: Info, Needs: NeedsBase,
		Summary: "the paths a revert to the base clobbers (warning with --strict-revert)",
		Description: "A revert from the layered image to the base (an rpm-ostree rebase) clobbers these owned paths: ostree's three-way /etc merge sees the files the daemon wrote as unmodified defaults of the layered image " +
			"and replaces them with the base's version, or removes them when the base lacks them; an enablement link the MachineConfig removed comes back; content outside /etc and /var is lost. " +
			"One finding lists every clobbered path (exactly the paths mcbake diff marks clobbered) and their count. " +
			"With --image the image's embedded manifest is compared with the base, otherwise a fresh render of the MachineConfigs against the base. " +
			"The severity is info, or warning with --strict-revert.",
		Fix: "Expected for most layered images: after a revert, re-apply the MachineConfigs or run the node's revert plan (mcbake plan, mcbake rewrite)."},
	{ID: RuleManifestDrift, Name: "manifest-drift", Severity: Error, Needs: NeedsImage,
		Summary: "the image's owned files or labels differ from its embedded manifest",
		Description: "The layered image does not match its own ownership manifest: the io.mcbake.manifest.digest label does not match the embedded manifest; " +
			"the top layer has no manifest at /usr/share/mcbake/manifest.json, or an invalid one; the entries of the top layer (and of the revert guard's layer under it) differ from the manifest's " +
			"(type, mode, uid, gid, content digest, link target; a file, link or whiteout the manifest does not record; a recorded path the layer lacks); " +
			"the io.mcbake.base.digest or io.mcbake.machineconfigs labels disagree with the manifest; or, with --base when it is the image's own base and the MachineConfigs are the ones baked, " +
			"a fresh render of the MachineConfigs against the base differs from the embedded manifest. Revert predictions (mcbake diff, plan) trust the manifest, so a drifted image makes them wrong.",
		Fix: "Rebuild the image with mcbake build; do not modify the mcbake layer or add layers on top of it."},
	{ID: RuleStaleImage, Name: "stale-image", Severity: Error, Needs: NeedsImage,
		Summary: "the MachineConfigs given differ from those baked into the image",
		Description: "The MachineConfigs given are not the ones baked into the image (its embedded manifest): one is not baked, one is baked but was not given, " +
			"or one's digest (the sha256 of its canonical JSON) differs from the baked one. The image does not carry what the cluster applies.",
		Fix: "Rebuild the image from the current MachineConfigs, or pass the MachineConfigs it was built from."},
	{ID: RuleUnitNotFound, Name: "unit-not-found", Severity: Warning, Needs: NeedsBase,
		Summary: "drop-ins or enablement for a unit that exists neither in the MachineConfigs nor in the base, or whose enablement the daemon skips",
		Description: "A systemd unit has drop-ins or enabled: true, but no unit file exists for it: no MachineConfig gives its contents and the base has none under /etc/systemd/system " +
			"or /usr/lib/systemd/system (an instance falls back to its template). The drop-ins configure nothing, and enabling it creates no symlink. " +
			"Also reported: a unit with enabled set and no contents that systemctl list-unit-files does not list, such as an instance of a template (foo@bar.service) without an instance file: " +
			"the machine-config-daemon checks that listing first and skips the unit's enablement, so neither enable nor disable happens.",
		Fix: "Add the unit's contents, correct the unit name, or use a base that ships the unit; for an instance, give the instance's contents or enable it through the template's DefaultInstance= or a preset."},
	{ID: RuleUnknownOwner, Name: "unknown-owner", Severity: Error, Needs: NeedsBase,
		Summary: "an owner name the base's passwd or group cannot resolve",
		Description: "A file, directory or link names a user or group (user.name, group.name) that neither the base's /etc/passwd nor /usr/lib/passwd (for groups, /etc/group and /usr/lib/group) defines, " +
			"or the MachineConfigs carry SSH keys for core and the base has no core user or group. mcbake build cannot resolve the owner, and the daemon fails on a node with the same files.",
		Fix: "Use an owner the base defines, give numeric ids (user.id, group.id), or add the account to the base image."},
	{ID: RuleImageIsBase, Name: "image-is-base", Severity: Warning, Needs: NeedsBaseAndImage,
		Summary: "the image is the base (same digest)",
		Description: "The image given with --image has the same manifest digest as the base: nothing was baked into it. A revert to the base is a no-op, " +
			"and an rpm-ostree rebase to it fails with \"Old and new refs are equal\". The image's manifest is not read.",
		Fix: "Pass the layered image that mcbake build wrote (the digest in its --digestfile)."},
	{ID: RuleEnabledNoInstall, Name: "enabled-without-install", Severity: Warning,
		Summary: "a unit with enabled: true but no [Install] section",
		Description: "A unit has enabled: true but neither its unit file (the MachineConfig's contents, else the base's) nor a drop-in the MachineConfig gives has an [Install] section with WantedBy=, RequiredBy=, Alias= or Also=. " +
			"systemctl enable creates no symlink, so the unit does not start at boot unless another unit pulls it in. Without --base only units whose contents a MachineConfig gives are checked.",
		Fix: "Add an [Install] section (for example WantedBy=multi-user.target), or drop enabled: true when another unit pulls it in."},
	{ID: RuleRenderFailure, Name: "render-failure", Severity: Error,
		Summary: "the MachineConfigs cannot be rendered",
		Description: "The MachineConfigs cannot be rendered as the machine-config-daemon would write them, for a reason no other rule covers: two MachineConfigs define a file, directory or link " +
			"of different kinds at one path; two paths land on the same place once symlinks are resolved; a parent directory is a file or link the MachineConfigs write; a unit file does not parse. " +
			"mcbake build fails with the same error. Items with an error finding are left out of the render so that the rest is still checked.",
		Fix: "Fix the path or unit the message names."},
	{ID: RuleBaseMismatch, Name: "base-mismatch", Severity: Info, Needs: NeedsBaseAndImage,
		Summary: "the --base is not the base the image was built from",
		Description: "The base given with --base is not the base the image was built from (its embedded manifest's base digest). " +
			"The revert analysis (MCB007) is against the given base, which is what a base bump needs; the render check of MCB008 is skipped, since it needs the image's own base.",
		Fix: "None for a base-bump analysis; otherwise pass the image's own base."},
	{ID: RuleKernelArguments, Name: "kernel-arguments", Severity: Warning,
		Summary: "spec.kernelArguments: an image cannot carry kernel arguments",
		Description: "The MachineConfig sets spec.kernelArguments. Kernel arguments live in the bootloader entry of a deployment, not in the OS image: mcbake bakes none of them, " +
			"and a node booted from the layered image alone does not have them. On an OpenShift node the machine-config-daemon applies them itself (rpm-ostree kargs) " +
			"when it rebases the node onto the image, before the reboot; they merge by concatenation in the MCO's merge order. One finding per MachineConfig, listing its arguments.",
		Fix: "Keep them in the MachineConfig for the machine-config-daemon, which applies them after the rebase; outside OpenShift, set them where the bootloader gets them (bootc: a file under /usr/lib/bootc/kargs.d)."},
	{ID: RuleExtensions, Name: "extensions", Severity: Warning,
		Summary: "spec.extensions: an image cannot carry the MCO's extensions",
		Description: "The MachineConfig sets spec.extensions. The machine-config-daemon installs extensions as RPM packages from the release's extensions container (rpm-ostree install) " +
			"when it updates or rebases a node; mcbake bakes files, not packages, so the layered image does not have them and a node booted from it alone lacks them. " +
			"One finding per MachineConfig, listing its extensions.",
		Fix: "Keep them in the MachineConfig for the machine-config-daemon, which applies them after the rebase; or install the packages in the image (mcbake build --engine buildah --containerfile-append) and drop them from the MachineConfig."},
	{ID: RuleKernelType, Name: "kernel-type", Severity: Warning,
		Summary: "spec.kernelType realtime or 64k-pages: the image carries the base's kernel",
		Description: "The MachineConfig sets spec.kernelType to realtime or 64k-pages (default is not reported). The layered image boots the base's kernel: " +
			"the machine-config-daemon switches kernels itself (rpm-ostree override replace) when it rebases the node onto the image. The MCO's merge gives realtime or 64k-pages " +
			"whenever any MachineConfig asks for one; with either, the kernel-devel extension is refused (MCB001).",
		Fix: "Keep it in the MachineConfig for the machine-config-daemon, which switches the kernel after the rebase; or build the image on a base with that kernel."},
	{ID: RuleFIPS, Name: "fips", Severity: Warning,
		Summary: "spec.fips: FIPS mode is set when a node is installed, not by an image",
		Description: "The MachineConfig sets spec.fips: true. FIPS mode (the fips=1 kernel argument and the FIPS crypto policy) is set up when a node is installed; " +
			"an image cannot carry it and the machine-config-daemon refuses to change it on a running node. Nodes of a cluster installed in FIPS mode keep it across a rebase onto the image.",
		Fix: "Install the cluster in FIPS mode (install-config fips: true); the installer's MachineConfigs that set it can stay."},
	{ID: RuleOSImageURL, Name: "os-image-url", Severity: Error, Needs: NeedsBase,
		Summary: "spec.osImageURL names neither --base nor --image",
		Description: "The MachineConfig sets spec.osImageURL to an image that is neither the base given with --base nor the layered image given with --image " +
			"(compared by digest when the URL has one, else by reference without the docker:// transport). The machine-config-daemon rebases a node onto osImageURL: " +
			"the node would leave the layered image for that one. MachineConfigs a controller generated (annotation machineconfiguration.openshift.io/generated-by-controller-version) " +
			"are not checked: the MCO ignores their osImageURL.",
		Fix: "Remove spec.osImageURL from the MachineConfig, or set it to the layered image (off-cluster layering) or to the base it is built on."},
	{ID: RuleStorageLayout, Name: "storage-layout", Severity: Warning,
		Summary: "storage disks, raid, filesystems or luks: set when a node is installed, not by an image",
		Description: "The MachineConfig's Ignition config has storage disks, raid, filesystems or luks (a /var partition, disk encryption). Ignition partitions, formats and encrypts " +
			"when a node is installed, and writes the mount units it generates into that node's /etc; the machine-config-daemon never applies these sections on a running node (it refuses " +
			"a change to disks, raid or filesystems, and ignores one to luks), so they stay in a pool's config as they were. mcbake bakes nothing for them: the nodes keep their disks, and their own mount units across a rebase. " +
			"One finding per section of each MachineConfig.",
		Fix: "Nothing, for nodes installed with this layout; a new layout needs new nodes (or the MCO's irreconcilable-change overrides)."},
	{ID: RuleKubeconfigMode, Name: "kubeconfig-mode", Severity: Error,
		Summary: "/etc/kubernetes/kubeconfig with a mode other than 0600: the machine-config-daemon's own validation fails",
		Description: "The merged MachineConfigs write /etc/kubernetes/kubeconfig with a mode other than 0600 (or none, which means 0644). After every update the machine-config-daemon " +
			"changes that file's mode to 0600 (updateKubeConfigPermission), and then its on-disk validation, at the next boot and in its drift monitor, expects the MachineConfig's mode: " +
			"the node goes Degraded. mcbake bakes the file at 0600, what the daemon leaves on disk.",
		Fix: "Set mode: 384 (0600) on the file, or leave /etc/kubernetes/kubeconfig to the installer, which writes it outside the MachineConfigs."},
	{ID: RuleUnusedField, Name: "unused-field", Severity: Warning,
		Summary: "a field nothing reads: a misspelt Ignition key, a field a MachineConfig does not have, a Butane warning",
		Description: "The MachineConfig sets a field that nothing reads, usually a typo: a key Ignition's parser reports as unused (mdoe for mode, unitz for units), " +
			"which Ignition and the machine-config-daemon ignore, so that the file gets the default instead (mode 0644, no contents); a field the MachineConfig object or its spec does not have, " +
			"which the API server drops; or, for a Butane config, a warning of Butane's (which butane --strict refuses). mcbake builds what the daemon would write, without the field.",
		Fix: "Correct the field's name, or remove it."},
	{ID: RuleEnablementCheck, Name: "enablement-check", Severity: Error,
		Summary: "a unit the machine-config-daemon finds enabled otherwise than its MachineConfig says, once it applied them all",
		Description: "After writing the units, the machine-config-daemon enables every unit with enabled: true in one systemctl call, then disables every unit with enabled: false in another. " +
			"Its on-disk validation (checkUnitEnabled, at the next boot and in its drift monitor) then asks systemctl is-enabled about each unit that has contents, is not masked and sets enabled, " +
			"and marks the node Degraded when a unit with enabled: true is disabled, masked or not found, or one with enabled: false is enabled. " +
			"That happens when the disable undoes an enable: a disabled unit's Also= names an enabled one, or a disabled template removes an enabled instance's links. " +
			"The image carries what the daemon writes, so the node would be Degraded as well.",
		Fix: "Remove the Also= (or the enabled: false) that undoes the enable, or set enabled consistently on the units it ties together."},
	{ID: RuleRevertGuard, Name: "revert-guard", Severity: Warning, Needs: NeedsImage,
		Summary: "the image has no revert guard: a revert to its base loses the MachineConfig files it baked",
		Description: "Every image mcbake build makes carries the revert guard: " + guard.BinaryPath + " and " + guard.UnitPath + ", enabled from /usr by " + guard.WantsPath + ". " +
			"At shutdown, before ostree finalizes a staged deployment, the guard writes into it the MachineConfig paths that the /etc merge would drop or revert, from the config the machine-config-daemon stored, " +
			"so that a node that goes back to the base image (or to another image) boots with every file in place, on a cluster whose MCO knows nothing of mcbake. " +
			"An image without it (built with --no-revert-guard, by ignition-apply, by the MCO's on-cluster build or by podman) reverts as ostree merges: every file the node left as the image baked it is lost. " +
			"The image has the guard when its config has the " + guard.Label + " label (an image built from a guarded one inherits it) or its layers hold the three paths.",
		Fix: "Build without --no-revert-guard; for an image built by others, add the guard with mcbake build --base IMAGE -o IMAGE (no -f), or COPY --from=MCBAKE_IMAGE " + guard.ToolImageDir + "/ / in its Containerfile (docs/node.md)."},
	{ID: RuleContentMismatch, Name: "image-content-mismatch", Severity: Error, Needs: NeedsImage,
		Summary: "an image built by others does not have what the MachineConfigs write at the paths they own",
		Description: "For an image without mcbake's manifest (built by the MCO's on-cluster build or a Containerfile running ignition-apply), every revert prediction rests on the image being built from the MachineConfigs given. " +
			"They are rendered against the image's own tree, and the image is compared, at each path a storage file, directory or link, a unit's contents, mask or non-empty drop-in writes, " +
			"with what is written there: type, content, mode, owner, link target; a path the image lacks is reported too. " +
			"What ignition-apply writes otherwise than the machine-config-daemon by design is not compared (docs/design.md, \"Images built by others\"): enablement (presets, not links), removals, parent directories, " +
			"a directory's mode and a file's content when the MachineConfig sets none, a symbolic link's owner, /etc/kubernetes/kubeconfig's mode, core's SSH keys and currentconfig. " +
			"Images with mcbake's manifest are checked by manifest-drift and stale-image instead.",
		Fix: "Pass the MachineConfigs the image was built from, or rebuild the image from these MachineConfigs."},
}

// Rules returns every rule, ordered by ID.
func Rules() []Rule {
	return append([]Rule(nil), rules...)
}

// LookupRule finds a rule by ID (MCB001, case-insensitive) or name.
func LookupRule(idOrName string) (Rule, bool) {
	for _, r := range rules {
		if strings.EqualFold(r.ID, idOrName) || r.Name == idOrName {
			return r, true
		}
	}
	return Rule{}, false
}

func ruleByID(id string) Rule {
	r, ok := LookupRule(id)
	if !ok {
		panic("lint: unknown rule " + id)
	}
	return r
}

// needsText says which flags a rule needs, for reports.
func (n Needs) text() string {
	switch n {
	case NeedsBase:
		return "--base"
	case NeedsImage:
		return "--image"
	case NeedsBaseAndImage:
		return "--base and --image"
	}
	return ""
}

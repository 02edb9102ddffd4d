package testbase

import (
	"archive/tar"
	"fmt"
	"strings"
)

// baseVersion is the RHCOS-like version of the default content, in the
// image's version label and in the final usr/lib/os-release.
const baseVersion = "418.94.202501010000-0"

// DefaultLayers returns the default content for linux/amd64: four layers.
//
//  1. root filesystem (gzip): top-level symlinks into /var (usr/local,
//     opt, home, root, srv, mnt) and into /usr (bin, sbin, lib, lib64),
//     the /var directories, passwd/group/shadow in /etc (root only) and
//     /usr/lib (system users, core 1000), nsswitch.conf with altfiles,
//     fake usr/bin/bash and ls, os-release, and the files layer 4 changes.
//  2. systemd (zstd): units in usr/lib/systemd/system, presets, and the
//     enablement symlinks systemctl preset would create in
//     etc/systemd/system (crio, sshd, zincati, chronyd, NetworkManager,
//     openvswitch, the cri-o.service alias and getty@tty1).
//  3. configuration (gzip): /etc files OpenShift MachineConfigs also
//     write, with different base content (registries.conf, policy.json,
//     storage.conf, crio 00-default, NetworkManager 01-ipv6.conf), one
//     with identical content (modules-load.d/iptables.conf) and an empty
//     etc/kubernetes.
//  4. update (gzip): whiteout of etc/issue.d/50-legacy.issue, opaque
//     etc/yum.repos.d re-adding one repo, a replaced usr/lib/os-release,
//     etc/sudoers.d re-declared 0750 (was 0755), and usr/libexec/git-core/git
//     as a hard link to usr/bin/git.
//
// The result is a fresh copy each call; callers may modify it.
func DefaultLayers() []Layer {
	return defaultLayers("amd64", false)
}

// defaultLayers returns the default content for an architecture; for the
// docker format every layer is gzip.
func defaultLayers(arch string, docker bool) []Layer {
	layers := []Layer{rootLayer(arch), systemdLayer(), configLayer(), updateLayer()}
	if docker {
		for i := range layers {
			layers[i].Compression = "gzip"
		}
	}
	return layers
}

func dir(p string, mode int64) File { return File{Path: p, Type: tar.TypeDir, Mode: mode} }

func file(p string, mode int64, content string) File {
	return File{Path: p, Type: tar.TypeReg, Mode: mode, Content: []byte(content)}
}

func symlink(p, target string) File {
	return File{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Target: target}
}

func owned(f File, uid, gid int) File {
	f.UID, f.GID = uid, gid
	return f
}

// fakeBinary is the content of a fake executable that names its
// architecture, so that images for different platforms differ.
func fakeBinary(name, arch string) string {
	return fmt.Sprintf("#!/bin/false\n# testbase fake %s binary for %s\n", name, unameArch(arch))
}

func unameArch(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	default:
		return arch
	}
}

func rootLayer(arch string) Layer {
	files := []File{
		symlink("bin", "usr/bin"), symlink("sbin", "usr/sbin"),
		symlink("lib", "usr/lib"), symlink("lib64", "usr/lib64"),
		symlink("home", "var/home"), symlink("mnt", "var/mnt"),
		symlink("opt", "var/opt"), symlink("root", "var/roothome"),
		symlink("srv", "var/srv"), symlink("ostree", "sysroot/ostree"),
		dir("boot", 0o755), dir("dev", 0o755), dir("proc", 0o555), dir("run", 0o755),
		dir("sys", 0o555), dir("sysroot", 0o755), dir("tmp", 0o1777),
		dir("usr", 0o755), dir("usr/bin", 0o755), dir("usr/sbin", 0o755),
		dir("usr/lib", 0o755), dir("usr/lib64", 0o755), dir("usr/libexec", 0o755),
		dir("usr/share", 0o755), symlink("usr/local", "../var/usrlocal"),
		dir("var", 0o755), dir("var/home", 0o755), dir("var/mnt", 0o755),
		dir("var/opt", 0o755), dir("var/roothome", 0o700), dir("var/srv", 0o755),
		dir("var/usrlocal", 0o755), dir("var/lib", 0o755), dir("var/log", 0o755),
		dir("var/tmp", 0o1777), owned(dir("var/lib/chrony", 0o750), 994, 991),
		file("usr/bin/bash", 0o755, fakeBinary("bash", arch)),
		file("usr/bin/ls", 0o755, fakeBinary("ls", arch)),
		symlink("usr/bin/sh", "bash"),
		file("usr/lib/os-release", 0o644, osRelease("418.94.202412010000-0")),
	}
	files = append(files, accountFiles()...)
	files = append(files, replacedLater()...)
	return Layer{Files: files, Compression: "gzip", Comment: "testbase: root filesystem"}
}

func osRelease(version string) string {
	return `NAME="Red Hat Enterprise Linux CoreOS"
ID="rhcos"
ID_LIKE="rhel fedora"
VERSION="` + version + `"
VERSION_ID="4.18"
VARIANT="CoreOS"
VARIANT_ID=coreos
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux CoreOS ` + version + `"
OSTREE_VERSION="` + version + `"
`
}

// accountFiles are the users and groups: root in /etc, the system users
// and core in /usr/lib (read through nss-altfiles).
func accountFiles() []File {
	return []File{
		dir("etc", 0o755),
		symlink("etc/os-release", "../usr/lib/os-release"),
		file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/bash\n"),
		file("etc/group", 0o644, "root:x:0:\n"),
		file("etc/shadow", 0, "root:*::0:99999:7:::\n"),
		file("etc/gshadow", 0, "root:::\n"),
		file("etc/nsswitch.conf", 0o644, "passwd:     files altfiles systemd\nshadow:     files\n"+
			"group:      files altfiles systemd\nhosts:      files myhostname dns\n"),
		file("usr/lib/passwd", 0o644, strings.Join([]string{
			"bin:x:1:1:bin:/bin:/sbin/nologin",
			"daemon:x:2:2:daemon:/sbin:/sbin/nologin",
			"openvswitch:x:800:800:Open vSwitch Daemons:/:/sbin/nologin",
			"zincati:x:993:990:Zincati user for auto-updates:/:/sbin/nologin",
			"chrony:x:994:991:chrony system user:/var/lib/chrony:/sbin/nologin",
			"core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash",
			"nobody:x:65534:65534:Kernel Overflow User:/:/sbin/nologin",
		}, "\n")+"\n"),
		file("usr/lib/group", 0o644, strings.Join([]string{
			"bin:x:1:", "daemon:x:2:", "wheel:x:10:",
			"openvswitch:x:800:", "hugetlbfs:x:801:openvswitch", "docker:x:982:",
			"zincati:x:990:", "chrony:x:991:", "core:x:1000:", "nobody:x:65534:",
		}, "\n")+"\n"),
		owned(dir("etc/openvswitch", 0o775), 800, 801),
		owned(file("etc/openvswitch/default.conf", 0o644, "OVS_USER_ID=\"openvswitch:hugetlbfs\"\n"), 800, 801),
	}
}

// replacedLater are the files the update layer whites out, hides, replaces
// or re-declares.
func replacedLater() []File {
	return []File{
		dir("etc/issue.d", 0o755),
		file("etc/issue.d/21-coreos.issue", 0o644, "Red Hat Enterprise Linux CoreOS \\r\n"),
		file("etc/issue.d/50-legacy.issue", 0o644, "This image predates the update layer.\n"),
		dir("etc/yum.repos.d", 0o755),
		file("etc/yum.repos.d/fedora.repo", 0o644, repo("fedora", "Fedora $releasever - $basearch")),
		file("etc/yum.repos.d/fedora-updates.repo", 0o644, repo("updates", "Fedora $releasever - $basearch - Updates")),
		dir("etc/sudoers.d", 0o755),
		file("etc/sudoers", 0o440, "root ALL=(ALL) ALL\n%wheel ALL=(ALL) ALL\n#includedir /etc/sudoers.d\n"),
		file("etc/sudoers.d/coreos-sudo-group", 0o440, "# CoreOS: core may sudo without a password\ncore ALL=(ALL) NOPASSWD: ALL\n"),
	}
}

func repo(id, name string) string {
	return fmt.Sprintf("[%s]\nname=%s\nmetalink=https://mirrors.example.org/metalink?repo=%s-$releasever&arch=$basearch\nenabled=1\ngpgcheck=1\n", id, name, id)
}

func updateLayer() Layer {
	return Layer{
		Files: []File{
			dir("etc/sudoers.d", 0o750),
			file("etc/yum.repos.d/rhel-9.6-baseos.repo", 0o644, repo("rhel-9.6-baseos", "RHEL 9.6 BaseOS")),
			file("usr/lib/os-release", 0o644, osRelease(baseVersion)),
			file("usr/bin/git", 0o755, "#!/bin/false\n# testbase fake git\n"),
			{Path: "usr/libexec/git-core/git", Type: tar.TypeLink, Target: "usr/bin/git"},
		},
		Whiteouts:   []string{"etc/issue.d/50-legacy.issue"},
		Opaque:      []string{"etc/yum.repos.d"},
		Compression: "gzip",
		Comment:     "testbase: update (whiteout, opaque directory, replaced file, mode change, hard link)",
	}
}

func configLayer() Layer {
	return Layer{
		Files: []File{
			dir("etc/containers", 0o755),
			file("etc/containers/registries.conf", 0o644, baseRegistriesConf),
			file("etc/containers/policy.json", 0o644, basePolicyJSON),
			file("etc/containers/storage.conf", 0o644, baseStorageConf),
			dir("etc/crio", 0o755), dir("etc/crio/crio.conf.d", 0o755),
			file("etc/crio/crio.conf.d/00-default", 0o644, baseCrioConf),
			dir("etc/NetworkManager", 0o755), dir("etc/NetworkManager/conf.d", 0o755),
			dir("etc/NetworkManager/dispatcher.d", 0o755),
			file("etc/NetworkManager/conf.d/01-ipv6.conf", 0o644, "[connection]\nipv6.dhcp-duid=stable-llt\n"),
			dir("etc/modules-load.d", 0o755),
			// Same content and mode as the MachineConfigs write.
			file("etc/modules-load.d/iptables.conf", 0o644, "# Force-load legacy iptables so it is usable from pod network namespaces\nip_tables\n"),
			dir("etc/kubernetes", 0o755),
			file("etc/chrony.conf", 0o644, "pool 2.rhel.pool.ntp.org iburst\ndriftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\n"),
			dir("etc/ssh", 0o755),
			file("etc/ssh/sshd_config", 0o600, "Include /etc/ssh/sshd_config.d/*.conf\nAuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys.d/*\nSubsystem sftp /usr/libexec/openssh/sftp-server\n"),
			dir("etc/sysctl.d", 0o755),
			file("etc/sysctl.d/50-coredump.conf", 0o644, "kernel.core_pattern=|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h\n"),
		},
		Compression: "gzip",
		Comment:     "testbase: default configuration",
	}
}

const baseRegistriesConf = `# For more information on this configuration file, see containers-registries.conf(5).
#
# An array of host[:port] registries to try when pulling an unqualified image, in order.
unqualified-search-registries = ["registry.access.redhat.com", "registry.redhat.io", "docker.io"]

short-name-mode = "enforcing"
`

const basePolicyJSON = `{
    "default": [
        {
            "type": "insecureAcceptAnything"
        }
    ],
    "transports": {
        "docker": {
            "registry.access.redhat.com": [
                {
                    "type": "signedBy",
                    "keyType": "GPGKeys",
                    "keyPath": "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
                }
            ]
        },
        "docker-daemon": {
            "": [
                {
                    "type": "insecureAcceptAnything"
                }
            ]
        }
    }
}
`

const baseStorageConf = `# See man 5 containers-storage.conf for more information.
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"

[storage.options.overlay]
mountopt = "nodev,metacopy=on"
`

const baseCrioConf = `[crio]
internal_wipe = true

[crio.runtime]
default_runtime = "runc"
selinux = true
cgroup_manager = "systemd"
log_level = "info"

[crio.image]
pause_image = "registry.k8s.io/pause:3.10"
`

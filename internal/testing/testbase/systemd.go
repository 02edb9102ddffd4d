package testbase

import (
	"sort"
	"strings"
)

const (
	unitDir   = "usr/lib/systemd/system"
	presetDir = "usr/lib/systemd/system-preset"
	etcUnits  = "etc/systemd/system"
)

// systemdLayer ships the units, the presets and the enablement symlinks
// that `systemctl preset-all` would create for them.
func systemdLayer() Layer {
	files := []File{
		dir("usr/lib/systemd", 0o755), dir(unitDir, 0o755), dir(presetDir, 0o755),
		dir(unitDir+"/multi-user.target.wants", 0o755),
		symlink(unitDir+"/multi-user.target.wants/getty.target", "../getty.target"),
		file(presetDir+"/40-coreos.preset", 0o644, preset40CoreOS),
		file(presetDir+"/90-default.preset", 0o644, preset90Default),
		file(presetDir+"/99-default-disable.preset", 0o644, "# Unit files not listed in a preset are disabled.\ndisable *\n"),
		dir("etc/systemd", 0o755), dir(etcUnits, 0o755),
		dir(etcUnits+"/multi-user.target.wants", 0o755),
		dir(etcUnits+"/getty.target.wants", 0o755),
		// Alias=cri-o.service of crio.service.
		symlink(etcUnits+"/cri-o.service", "/"+unitDir+"/crio.service"),
		symlink(etcUnits+"/getty.target.wants/getty@tty1.service", "/"+unitDir+"/getty@.service"),
	}
	names := make([]string, 0, len(units))
	for name := range units {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		files = append(files, file(unitDir+"/"+name, 0o644, units[name]))
	}
	for _, name := range presetEnabledMultiUser {
		files = append(files, symlink(etcUnits+"/multi-user.target.wants/"+name, "/"+unitDir+"/"+name))
	}
	return Layer{Files: files, Compression: "zstd", Comment: "testbase: systemd units and presets"}
}

// presetEnabledMultiUser are the preset-enabled units whose [Install]
// section says WantedBy=multi-user.target.
var presetEnabledMultiUser = []string{
	"NetworkManager.service", "chronyd.service", "crio.service",
	"openvswitch.service", "sshd.service", "zincati.service",
}

const preset40CoreOS = `# CoreOS defaults.
enable crio.service
enable sshd.service
enable zincati.service
enable chronyd.service
# Enabled here so that MachineConfigs with openvswitch.service enabled: false
# remove a link the base has.
enable openvswitch.service
`

const preset90Default = `# Distribution defaults.
enable NetworkManager.service
enable getty@.service
`

func unit(sections ...string) string {
	return strings.Join(sections, "\n")
}

var units = map[string]string{
	"crio.service": unit(`[Unit]
Description=Container Runtime Interface for OCI (CRI-O)
Documentation=https://github.com/cri-o/cri-o
Wants=network-online.target
Before=kubelet.service
After=network-online.target
`, `[Service]
Type=notify
EnvironmentFile=-/etc/sysconfig/crio
Environment=GOTRACEBACK=crash
ExecStart=/usr/bin/crio $CRIO_CONFIG_OPTIONS $CRIO_RUNTIME_OPTIONS $CRIO_STORAGE_OPTIONS $CRIO_NETWORK_OPTIONS $CRIO_METRICS_OPTIONS
ExecReload=/bin/kill -s HUP $MAINPID
TasksMax=infinity
LimitNOFILE=1048576
LimitNPROC=1048576
LimitCORE=infinity
OOMScoreAdjust=-999
TimeoutStartSec=0
Restart=on-failure
RestartSec=10
`, `[Install]
WantedBy=multi-user.target
Alias=cri-o.service
`),
	"chronyd.service": unit(`[Unit]
Description=NTP client/server
Documentation=man:chronyd(8) man:chrony.conf(5)
After=ntpdate.service sntp.service ntpd.service
Conflicts=ntpd.service systemd-timesyncd.service
ConditionCapability=CAP_SYS_TIME
`, `[Service]
Type=forking
PIDFile=/run/chrony/chronyd.pid
EnvironmentFile=-/etc/sysconfig/chronyd
ExecStart=/usr/sbin/chronyd $OPTIONS
PrivateTmp=yes
ProtectHome=yes
ProtectSystem=full
`, `[Install]
WantedBy=multi-user.target
`),
	"chrony-wait.service": unit(`[Unit]
Description=Wait for chrony to synchronize system clock
Documentation=man:chronyc(1)
After=chronyd.service
Requires=chronyd.service
Before=time-sync.target
Wants=time-sync.target
`, `[Service]
Type=oneshot
ExecStart=/usr/bin/chronyc -h 127.0.0.1,::1 waitsync 0 0.1 0.0 1
TimeoutStartSec=180
RemainAfterExit=yes
StandardOutput=null
`, `[Install]
WantedBy=multi-user.target
`),
	"NetworkManager.service": unit(`[Unit]
Description=Network Manager
Documentation=man:NetworkManager(8)
Wants=network.target
After=network-pre.target dbus.service
Before=network.target
`, `[Service]
Type=dbus
BusName=org.freedesktop.NetworkManager
ExecReload=/usr/bin/busctl call org.freedesktop.NetworkManager /org/freedesktop/NetworkManager org.freedesktop.NetworkManager Reload u 0
ExecStart=/usr/sbin/NetworkManager --no-daemon
Restart=on-failure
KillMode=process
`, `[Install]
WantedBy=multi-user.target
`),
	"openvswitch.service": unit(`[Unit]
Description=Open vSwitch
Before=network.target network.service
After=network-pre.target ovsdb-server.service ovs-vswitchd.service
PartOf=network.target
Requires=ovsdb-server.service
Requires=ovs-vswitchd.service
`, `[Service]
Type=oneshot
ExecStart=/bin/true
ExecReload=/usr/share/openvswitch/scripts/ovs-systemd-reload
ExecStop=/bin/true
RemainAfterExit=yes
`, `[Install]
WantedBy=multi-user.target
`),
	"ovsdb-server.service": unit(`[Unit]
Description=Open vSwitch Database Unit
After=syslog.target network-pre.target dpdk.service local-fs.target
Before=network.target network.service
PartOf=openvswitch.service
`, `[Service]
Type=forking
PIDFile=/run/openvswitch/ovsdb-server.pid
Restart=on-failure
EnvironmentFile=/etc/openvswitch/default.conf
EnvironmentFile=-/etc/sysconfig/openvswitch
ExecStart=/usr/share/openvswitch/scripts/ovs-ctl --no-ovs-vswitchd --no-monitor --system-id=random start $OPTIONS
ExecStop=/usr/share/openvswitch/scripts/ovs-ctl --no-ovs-vswitchd stop
RuntimeDirectory=openvswitch
RuntimeDirectoryMode=0755
RuntimeDirectoryPreserve=yes
`),
	"ovs-vswitchd.service": unit(`[Unit]
Description=Open vSwitch Forwarding Unit
After=ovsdb-server.service network-pre.target systemd-udev-settle.service
Before=network.target network.service
Requires=ovsdb-server.service
PartOf=openvswitch.service
`, `[Service]
Type=forking
PIDFile=/run/openvswitch/ovs-vswitchd.pid
Restart=on-failure
Environment=HOME=/var/run/openvswitch
EnvironmentFile=/etc/openvswitch/default.conf
EnvironmentFile=-/etc/sysconfig/openvswitch
ExecStart=/usr/share/openvswitch/scripts/ovs-ctl --no-ovsdb-server --no-monitor --system-id=random start $OPTIONS
ExecStop=/usr/share/openvswitch/scripts/ovs-ctl --no-ovsdb-server stop
`),
	"ipsec.service": unit(`[Unit]
Description=Internet Key Exchange (IKE) Protocol Daemon for IPsec
Wants=network-online.target
After=network-online.target
Documentation=man:ipsec(8) man:pluto(8) man:ipsec.conf(5)
`, `[Service]
Type=notify
Restart=always
EnvironmentFile=-/etc/sysconfig/pluto
ExecStartPre=/usr/libexec/ipsec/addconn --config /etc/ipsec.conf --checkconfig
ExecStart=/usr/libexec/ipsec/pluto --leak-detective --config /etc/ipsec.conf --nofork
ExecStop=/usr/libexec/ipsec/whack --shutdown
ExecReload=/usr/libexec/ipsec/whack --listen
`, `[Install]
WantedBy=multi-user.target
`),
	"openvswitch-ipsec.service": unit(`[Unit]
Description=OVS IPsec daemon
Requires=openvswitch.service
After=openvswitch.service
`, `[Service]
Type=forking
PIDFile=/run/openvswitch/ovs-monitor-ipsec.pid
ExecStart=/usr/share/openvswitch/scripts/ovs-ctl --ike-daemon=libreswan start-ovs-ipsec
ExecStop=/usr/share/openvswitch/scripts/ovs-ctl stop-ovs-ipsec
`, `[Install]
WantedBy=multi-user.target
`),
	"rpm-ostreed.service": unit(`[Unit]
Description=rpm-ostree System Management Daemon
Documentation=man:rpm-ostree(1)
ConditionPathExists=/ostree
RequiresMountsFor=/boot
`, `[Service]
Type=dbus
BusName=org.projectatomic.rpmostree1
MountFlags=slave
ProtectHome=true
NotifyAccess=main
TimeoutStartSec=5m
ExecStart=+rpm-ostree start-daemon
ExecReload=rpm-ostree reload
`),
	"zincati.service": unit(`[Unit]
Description=Zincati Update Agent
Documentation=https://github.com/coreos/zincati
After=network-online.target
Wants=network-online.target
ConditionPathExists=/run/ostree-booted
`, `[Service]
User=zincati
Group=zincati
Environment=ZINCATI_VERBOSITY="-v"
Type=notify
ExecStart=/usr/libexec/zincati agent ${ZINCATI_VERBOSITY}
Restart=on-failure
RestartSec=10s
`, `[Install]
WantedBy=multi-user.target
`),
	"docker.socket": unit(`[Unit]
Description=Docker Socket for the API
PartOf=docker.service
`, `[Socket]
ListenStream=/run/docker.sock
SocketMode=0660
SocketUser=root
SocketGroup=docker
`, `[Install]
WantedBy=sockets.target
`),
	"sshd.service": unit(`[Unit]
Description=OpenSSH server daemon
Documentation=man:sshd(8) man:sshd_config(5)
After=network.target sshd-keygen.target
Wants=sshd-keygen.target
`, `[Service]
Type=notify
EnvironmentFile=-/etc/sysconfig/sshd
ExecStart=/usr/sbin/sshd -D $OPTIONS
ExecReload=/bin/kill -HUP $MAINPID
KillMode=process
Restart=on-failure
RestartSec=42s
`, `[Install]
WantedBy=multi-user.target
`),
	"getty@.service": unit(`[Unit]
Description=Getty on %I
Documentation=man:agetty(8) man:systemd-getty-generator(8)
After=systemd-user-sessions.service plymouth-quit-wait.service getty-pre.target
Before=getty.target
IgnoreOnIsolate=yes
Conflicts=rescue.service
Before=rescue.service
ConditionPathExists=/dev/tty0
`, `[Service]
ExecStart=-/sbin/agetty -o '-p -- \\u' --noclear - $TERM
Type=idle
Restart=always
RestartSec=0
UtmpIdentifier=%I
StandardInput=tty
StandardOutput=tty
TTYPath=/dev/%I
TTYReset=yes
TTYVHangup=yes
TTYVTDisallocate=yes
`, `[Install]
WantedBy=getty.target
DefaultInstance=tty1
`),
	"multi-user.target": unit(`[Unit]
Description=Multi-User System
Documentation=man:systemd.special(7)
Requires=basic.target
Conflicts=rescue.service rescue.target
After=basic.target rescue.service rescue.target
AllowIsolate=yes
`),
	"sockets.target": unit(`[Unit]
Description=Sockets
Documentation=man:systemd.special(7)
`),
	"getty.target": unit(`[Unit]
Description=Login Prompts
Documentation=man:systemd.special(7) man:systemd-getty-generator(8)
Documentation=https://0pointer.de/blog/projects/serial-console.html
`),
}

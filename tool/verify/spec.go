package verify

import (
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

// specFields reports the fields beside the Ignition config that an image
// cannot carry (MCB016-MCB020), and the storage layout Ignition applies
// at install (MCB021).
func (c *checker) specFields() {
	for _, mc := range c.in.mcs {
		at := func(field string) machineconfig.Source {
			return machineconfig.Source{File: mc.File, MachineConfig: mc.Name, Field: field}
		}
		s := mc.Spec
		if len(s.KernelArguments) > 0 {
			c.add(RuleKernelArguments, at("spec.kernelArguments"), "", "kernel arguments %s: an image cannot carry them; the machine-config-daemon applies them after the rebase", strings.Join(s.KernelArguments, " "))
		}
		if len(s.Extensions) > 0 {
			c.add(RuleExtensions, at("spec.extensions"), "", "extensions %s: the image does not have them; the machine-config-daemon installs them after the rebase", strings.Join(s.Extensions, ", "))
		}
		if s.KernelType == machineconfig.KernelRealtime || s.KernelType == machineconfig.Kernel64kPages {
			c.add(RuleKernelType, at("spec.kernelType"), "", "kernelType %s: the image boots the base's kernel; the machine-config-daemon switches to the %s kernel after the rebase", s.KernelType, s.KernelType)
		}
		if s.FIPS {
			c.add(RuleFIPS, at("spec.fips"), "", "fips: true: FIPS mode is set when a node is installed; the image cannot carry it and the machine-config-daemon does not change it on a running node")
		}
		st := mc.Ignition.Storage
		for _, sec := range []struct {
			name string
			n    int
		}{{"disks", len(st.Disks)}, {"raid", len(st.Raid)}, {"filesystems", len(st.Filesystems)}, {"luks", len(st.Luks)}} {
			if sec.n > 0 {
				c.add(RuleStorageLayout, at("spec.config.storage."+sec.name), "", "storage %s (%d): Ignition applies them when a node is installed; the image cannot carry them and the machine-config-daemon never applies them on a running node", sec.name, sec.n)
			}
		}
		if s.OSImageURL != "" && c.base != nil && !mc.Generated() && !c.namesInput(s.OSImageURL) {
			c.add(RuleOSImageURL, at("spec.osImageURL"), "", "osImageURL %s names neither the base (%s, %s) nor the image: the machine-config-daemon would rebase the node onto it", s.OSImageURL, c.base.ref, c.base.digest)
		}
	}
}

// unusedFields reports each MachineConfig's fields that nothing reads
// (MCB023).
func (c *checker) unusedFields() {
	for _, mc := range c.in.mcs {
		for _, w := range mc.Warnings {
			c.add(RuleUnusedField, machineconfig.Source{File: w.File, MachineConfig: w.MachineConfig, Field: w.Field}, "", "%s", w.Msg)
		}
	}
}

// kubeconfigMode reports the kubeconfig file of the merged MachineConfigs
// when its mode is not 0600 (MCB022): the MCD makes it 0600 after every
// update, then its validation expects the MachineConfig's mode.
func (c *checker) kubeconfigMode() {
	for _, f := range c.merged.Files {
		if f.Path != render.KubeConfig {
			continue
		}
		mode := 0o644
		if f.Mode != nil {
			mode = *f.Mode
		}
		if mode != 0o600 {
			c.add(RuleKubeconfigMode, f.Source, f.Path, "%s has mode %04o: the machine-config-daemon makes it 0600 after every update, then its on-disk validation expects %04o and the node goes Degraded", f.Path, mode, mode)
		}
	}
}

// namesInput reports whether an osImageURL names the base or the image:
// by digest when it has one, else by reference (without the docker://
// transport of --base and --image).
func (c *checker) namesInput(url string) bool {
	type input struct{ ref, digest string }
	ins := []input{{c.base.ref, c.base.digest.String()}}
	if c.image != nil {
		ins = append(ins, input{c.image.ref, c.image.digest.String()})
	}
	_, dgst, hasDigest := strings.Cut(url, "@")
	for _, in := range ins {
		if hasDigest && dgst == in.digest {
			return true
		}
		if strings.TrimPrefix(in.ref, "docker://") == url {
			return true
		}
	}
	return false
}

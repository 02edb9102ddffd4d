package buildah

import (
	"errors"

	nettypes "go.podman.io/common/libnetwork/types"
)

// errNoNetwork is what noNetwork answers to anything but its name.
var errNoNetwork = errors.New("mcbake's buildah engine has no container networks (RUN uses the host's network)")

// noNetwork is a network backend that has no networks. buildah looks for
// netavark or CNI when it creates a builder unless it is given one; with
// chroot isolation RUN uses the host's network and never asks it for one.
type noNetwork struct{}

func (noNetwork) NetworkCreate(nettypes.Network, *nettypes.NetworkCreateOptions) (nettypes.Network, error) {
	return nettypes.Network{}, errNoNetwork
}
func (noNetwork) NetworkUpdate(string, nettypes.NetworkUpdateOptions) error { return errNoNetwork }
func (noNetwork) NetworkRemove(string) error                                { return errNoNetwork }
func (noNetwork) NetworkList(...nettypes.FilterFunc) ([]nettypes.Network, error) {
	return nil, nil
}
func (noNetwork) NetworkInspect(string) (nettypes.Network, error) {
	return nettypes.Network{}, errNoNetwork
}
func (noNetwork) Setup(string, nettypes.SetupOptions) (map[string]nettypes.StatusBlock, error) {
	return nil, errNoNetwork
}
func (noNetwork) Teardown(string, nettypes.TeardownOptions) error { return nil }
func (noNetwork) RunInRootlessNetns(func() error) error           { return errNoNetwork }
func (noNetwork) RootlessNetnsInfo() (*nettypes.RootlessNetnsInfo, error) {
	return nil, errNoNetwork
}
func (noNetwork) Drivers() []string                 { return nil }
func (noNetwork) DefaultNetworkName() string        { return "" }
func (noNetwork) NetworkInfo() nettypes.NetworkInfo { return nettypes.NetworkInfo{Backend: "none"} }

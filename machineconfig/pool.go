package machineconfig

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// RoleLabel is the label that says which pool's role a MachineConfig is
// for; a pool's machineConfigSelector selects MachineConfigs by it.
const RoleLabel = "machineconfiguration.openshift.io/role"

// The pools the MCO defines itself. Every other pool is a custom pool,
// which merges the worker MachineConfigs first and its own after them
// (docs/design.md, "Merging").
const (
	WorkerPool  = "worker"
	MasterPool  = "master"
	ArbiterPool = "arbiter"
)

// GeneratedByAnnotation marks a MachineConfig a controller generated; the
// MCO ignores its osImageURL and baseOSExtensionsContainerImage.
const GeneratedByAnnotation = "machineconfiguration.openshift.io/generated-by-controller-version"

// roleField is the JSON path of the role label, for errors.
const roleField = "metadata.labels[" + RoleLabel + "]"

// Role returns the value of the MachineConfig's role label ("" without
// one).
func (mc *MachineConfig) Role() string { return mc.Labels[RoleLabel] }

// IsCustomPool reports whether pool is a custom pool: not worker, master
// or arbiter.
func IsCustomPool(pool string) bool {
	return pool != WorkerPool && pool != MasterPool && pool != ArbiterPool
}

// PoolMerges reports whether pool merges MachineConfigs of role: its own,
// and for a custom pool the worker ones too.
func PoolMerges(pool, role string) bool {
	return role == pool || (role == WorkerPool && IsCustomPool(pool))
}

// Pool returns the pool the MachineConfigs are merged for. A pool given
// (non-empty) must merge every labelled MachineConfig; otherwise the pool
// is inferred from the role labels: worker when every labelled one is a
// worker one (or none is labelled), the one other role when the others
// are worker ones of a custom pool or there are none. MachineConfigs
// without the role label belong to the pool. Roles no single pool merges
// together (master and worker, two custom pools) are an error naming each
// MachineConfig outside the pool.
func Pool(mcs []*MachineConfig, pool string) (string, error) {
	if pool == "" {
		var err error
		if pool, err = inferPool(mcs); err != nil {
			return "", err
		}
	}
	var errs []error
	for _, mc := range mcs {
		if r := mc.Role(); r != "" && !PoolMerges(pool, r) {
			errs = append(errs, &FieldError{File: mc.File, MachineConfig: mc.Name, Field: roleField, Reason: ReasonInvalid,
				Msg: fmt.Sprintf("role %q is not merged by pool %q (%s)", r, pool, poolMerges(pool))})
		}
	}
	return pool, errors.Join(errs...)
}

func poolMerges(pool string) string {
	if IsCustomPool(pool) {
		return fmt.Sprintf("a custom pool merges the %s MachineConfigs, then its own", WorkerPool)
	}
	return "it merges only its own MachineConfigs"
}

// inferPool finds the one pool that merges every role present.
func inferPool(mcs []*MachineConfig) (string, error) {
	roles := map[string]bool{}
	for _, mc := range mcs {
		if r := mc.Role(); r != "" && r != WorkerPool {
			roles[r] = true
		}
	}
	var others []string
	for r := range roles {
		others = append(others, r)
	}
	sort.Strings(others)
	switch {
	case len(others) == 0:
		return WorkerPool, nil
	case len(others) == 1 && (IsCustomPool(others[0]) || !hasRole(mcs, WorkerPool)):
		return others[0], nil
	}
	if hasRole(mcs, WorkerPool) {
		others = append([]string{WorkerPool}, others...)
	}
	return "", fmt.Errorf("MachineConfigs for roles %s (label %s): no single pool merges them; give the pool (--pool)", strings.Join(others, ", "), RoleLabel)
}

func hasRole(mcs []*MachineConfig, role string) bool {
	for _, mc := range mcs {
		if mc.Role() == role {
			return true
		}
	}
	return false
}

// ForPool returns the MachineConfigs as pool merges them: pool "" infers
// the pool (see Pool), and every MachineConfig without the role label
// gets pool's role, so that Merge orders it as the pool's own. The
// MachineConfigs are copied, not changed. Errors are Pool's.
func ForPool(mcs []*MachineConfig, pool string) ([]*MachineConfig, error) {
	pool, err := Pool(mcs, pool)
	if err != nil {
		return nil, err
	}
	out := make([]*MachineConfig, len(mcs))
	for i, mc := range mcs {
		out[i] = mc
		if mc.Role() != "" {
			continue
		}
		c := *mc
		c.Labels = map[string]string{RoleLabel: pool}
		for k, v := range mc.Labels {
			c.Labels[k] = v
		}
		out[i] = &c
	}
	return out, nil
}

// mergeOrder sorts MachineConfigs as the MCO's MergeMachineConfigs does:
// those of the worker role first, then the others, each by name. A
// MachineConfig without the role label counts as the pool's own, the
// pool inferred from the others' labels (see Pool).
func mergeOrder(mcs []*MachineConfig) []*MachineConfig {
	pool, err := inferPool(mcs)
	if err != nil {
		pool = ""
	}
	worker := func(mc *MachineConfig) bool {
		r := mc.Role()
		if r == "" {
			r = pool
		}
		return r == WorkerPool
	}
	sorted := append([]*MachineConfig(nil), mcs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if wi, wj := worker(sorted[i]), worker(sorted[j]); wi != wj {
			return wi
		}
		return sorted[i].Name < sorted[j].Name
	})
	return sorted
}

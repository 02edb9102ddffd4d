//go:build !goexperiment.jsonv2

package machineconfig

// jsonV2: see jsonv2_test.go.
const jsonV2 = false

//go:build goexperiment.jsonv2

package machineconfig

// jsonV2 tells that encoding/json runs on encoding/json/v2's
// implementation (GOEXPERIMENT=jsonv2, the default planned for Go 1.27), whose
// errors are worded otherwise: a type error names the field by its place
// in the document, indices included.
const jsonV2 = true

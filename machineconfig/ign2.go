package machineconfig

import "github.com/coreos/ignition/v2/config/v3_5/types"

// parseIgnition2 will convert spec 2 configs; for now they stay refused.
func parseIgnition2([]byte) (types.Config, map[string]string, bool, error) {
	return types.Config{}, nil, false, nil
}

// mapField rewrites the longest prefix of field that fields maps (a
// prefix ends at the end, a "." or a "[").
func mapField(fields map[string]string, field string) string {
	for end := len(field); end > 0; end-- {
		if end < len(field) && field[end] != '.' && field[end] != '[' {
			continue
		}
		if to, ok := fields[field[:end]]; ok {
			return to + field[end:]
		}
	}
	return field
}

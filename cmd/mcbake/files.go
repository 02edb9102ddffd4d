package main

import (
	"github.com/google/renameio/v2"
)

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	return renameio.WriteFile(path, b, 0o644)
}

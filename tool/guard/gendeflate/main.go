// Command gendeflate writes each embedded node binary's deflate encoding beside it.
//
// The revert guard's layer writer splices it in (guard.Deflate); make
// guard-bin runs it on each binary it embeds.
//
//	gendeflate BINARY...
package main

import (
	"fmt"
	"os"

	"github.com/google/renameio/v2"

	"github.com/mcbake/mcbake/tool/guard"
)

func main() {
	for _, file := range os.Args[1:] {
		if err := write(file); err != nil {
			fmt.Fprintln(os.Stderr, "gendeflate:", err)
			os.Exit(1)
		}
	}
}

func write(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	d, err := guard.Deflate(b)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return renameio.WriteFile(file+guard.DeflatedSuffix, d, 0o644)
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/image"
)

func newManifestCommand() *cobra.Command {
	var img imageFlags
	var summary bool
	cmd := &cobra.Command{
		Use:   "manifest IMAGE",
		Short: "Print the ownership manifest embedded in a layered image",
		Long: `Manifest reads /usr/share/mcbake/manifest.json from the image's top layer
(streaming only that layer, and only until the file is found; or from the
cache directory, where it is kept by the layer's digest), checks it
against the io.mcbake.manifest.digest label and prints it.`,
		Example: `  mcbake manifest oci:layered:latest
  mcbake manifest --summary docker://quay.io/org/worker:4.18 --authfile auth.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, raw, err := readEmbedded(cmd, &img, args[0])
			if err != nil {
				return err
			}
			if summary {
				return printSummary(cmd.OutOrStdout(), args[0], m)
			}
			_, err = cmd.OutOrStdout().Write(raw)
			return err
		},
	}
	img.register(cmd)
	cmd.Flags().BoolVar(&summary, "summary", false, "print counts instead of the JSON")
	return cmd
}

// readEmbedded reads a layered image's embedded manifest.
func readEmbedded(cmd *cobra.Command, img *imageFlags, ref string) (*manifest.Manifest, []byte, error) {
	opts, cacheDir, err := img.options(cmd)
	if err != nil {
		return nil, nil, err
	}
	m, raw, _, err := image.ManifestOf(cmd.Context(), ref, opts, cacheDir)
	return m, raw, err
}

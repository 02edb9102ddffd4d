//go:build tools

// This file pins modules that mcbake's packages import, so that
// `go mod tidy` keeps them while those packages are being written.
package tools

import (
	_ "github.com/containers/buildah"
	_ "github.com/containers/buildah/define"
	_ "github.com/containers/buildah/imagebuildah"
	_ "github.com/containers/image/v5/copy"
	_ "github.com/containers/image/v5/directory"
	_ "github.com/containers/image/v5/docker"
	_ "github.com/containers/image/v5/docker/archive"
	_ "github.com/containers/image/v5/manifest"
	_ "github.com/containers/image/v5/oci/archive"
	_ "github.com/containers/image/v5/oci/layout"
	_ "github.com/containers/image/v5/signature"
	_ "github.com/containers/image/v5/storage"
	_ "github.com/containers/image/v5/transports/alltransports"
	_ "github.com/containers/image/v5/types"
	_ "github.com/containers/storage"
	_ "github.com/coreos/go-systemd/v22/unit"
	_ "github.com/coreos/ignition/v2/config/v3_5"
	_ "github.com/cyphar/filepath-securejoin"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/renameio/v2"
	_ "github.com/joshdk/go-junit"
	_ "github.com/klauspost/compress/gzip"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/mattn/go-isatty"
	_ "github.com/opencontainers/go-digest"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/owenrumney/go-sarif/v3/pkg/report"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "github.com/vbauerster/mpb/v8"
	_ "github.com/vincent-petithory/dataurl"
	_ "golang.org/x/sys/unix"
	_ "sigs.k8s.io/yaml"
)

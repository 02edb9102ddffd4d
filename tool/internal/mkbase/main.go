// Command mkbase writes a deterministic RHCOS-like base image.
//
// It writes it as an OCI layout (see package testbase) and prints the digest
// index.json points at. It can also write the same base in the other forms
// mcbake indexes differently: as zstd:chunked (-chunked), and into
// containers-storage (-storage), both with containers/image.
//
//	go -C tool run ./internal/mkbase -o DIR [-size 1GiB -files 50000 -layers 8]
//	    [-ostree] [-format oci|docker] [-platforms linux/amd64,linux/arm64] [-tag latest]
//	    [-chunked DIR] [-storage NAME -storage-root DIR -storage-runroot DIR -storage-driver overlay]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/tool/image"
)

func main() {
	if image.InitReexec() {
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkbase:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mkbase", flag.ContinueOnError)
	out := fs.String("o", "", "layout directory to write (must not exist or be empty)")
	size := fs.String("size", "", "bulk content to add, e.g. 1GiB, 500MiB, 2000000 (none when empty)")
	files := fs.Int("files", 50000, "number of bulk files (with -size)")
	layers := fs.Int("layers", 8, "number of bulk layers (with -size)")
	format := fs.String("format", "oci", "manifest format: oci or docker")
	platforms := fs.String("platforms", "linux/amd64", "comma-separated os/arch[/variant] list")
	tag := fs.String("tag", "latest", "reference name in index.json")
	ostree := fs.Bool("ostree", false, "ostree-shaped layers: every file an object under sysroot/ostree/repo/objects/ and a hard link at its path")
	chunked := fs.String("chunked", "", "also write the base as zstd:chunked to this OCI layout directory")
	storage := fs.String("storage", "", "also copy the base into containers-storage under this name")
	var so image.Options
	fs.StringVar(&so.StorageRoot, "storage-root", "", "containers-storage root (with -storage)")
	fs.StringVar(&so.StorageRunRoot, "storage-runroot", "", "containers-storage run root (with -storage)")
	fs.StringVar(&so.StorageDriver, "storage-driver", "", "containers-storage driver (with -storage)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: mkbase -o DIR [flags]")
	}
	opts := testbase.Options{Format: *format, Platforms: strings.Split(*platforms, ","), Tag: *tag, Ostree: *ostree}
	if *size != "" {
		total, err := parseSize(*size)
		if err != nil {
			return err
		}
		opts.Size = &testbase.SizeOptions{TotalBytes: total, Files: *files, Layers: *layers}
	}
	d, err := testbase.Write(*out, opts)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, d); err != nil {
		return err
	}
	return convert(*out+":"+*tag, *chunked+":"+*tag, *storage, so)
}

// convert writes the other forms of the base at layout (DIR:TAG): as
// zstd:chunked at chunked (DIR:TAG; none for ":TAG"), into storage.
func convert(layout, chunked, storage string, opts image.Options) error {
	opts.InsecurePolicy = true // the base was just written here
	src := "oci:" + layout
	if !strings.HasPrefix(chunked, ":") {
		if err := image.Convert(context.Background(), src, "oci:"+chunked, "zstd:chunked", opts); err != nil {
			return err
		}
	}
	if storage != "" {
		return image.Convert(context.Background(), src, "containers-storage:"+storage, "", opts)
	}
	return nil
}

// parseSize reads a byte count with an optional KiB/MiB/GiB (or K/M/G, KB/MB/GB) suffix.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

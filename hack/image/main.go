// Command image builds the static cairn binary into an OCI image without Docker
// and without a base image, pushes it and signs it with cosign: `make image`.
//
// The image has one layer: the binary at /cairn, the build machine's CA bundle at
// /etc/ssl/certs/ca-certificates.crt, /etc/passwd and /etc/group naming the
// non-root user nonroot (65532:65532), its home and an empty /tmp. There is no
// shell. Every timestamp is SOURCE_DATE_EPOCH (0 when unset), so the same binary
// and flags always give the same digest. The image runs /cairn as 65532:65532.
//
// On success it prints one line on stdout, the digest reference
// HOST/REPOSITORY@sha256:..., for manifests to pin the image by; notes go to stderr.
//
//	go run ./hack/image -binary bin/cairn-linux-amd64 -image 127.0.0.1:5000/cairn/cairn:dev \
//	    [-sign-key cosign.key] [-arch amd64] [-version V -revision SHA -source URL]
//
// The key is a cosign private key (`cairn keygen`); its password comes from
// CAIRN_PASSWORD or COSIGN_PASSWORD, as for `cairn sign`. Without -sign-key the
// image is pushed unsigned, and stderr says so. Registry credentials come only from
// -registry-config (a docker config.json). Registries on loopback, private networks
// and .local names are spoken to over plain HTTP (go-containerregistry's rule), all
// others over HTTPS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
)

// options are the flags of the command.
type options struct {
	binary         string
	image          string
	arch           string
	caBundle       string
	signKey        string
	registryConfig string
	version        string
	revision       string
	source         string
	refFile        string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds, pushes and signs the image the flags in args describe and prints
// its digest reference on stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dst, err := parseDestination(opts)
	if err != nil {
		return err
	}
	key, err := loadSigningKey(opts.signKey)
	if err != nil {
		return err
	}
	img, err := buildImage(opts)
	if err != nil {
		return err
	}
	ref, err := publish(ctx, dst, img, key, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ref)
	if opts.refFile == "" {
		return nil
	}
	if err := os.WriteFile(opts.refFile, []byte(ref+"\n"), 0o644); err != nil {
		return fmt.Errorf("failed to write -ref-file: %w", err)
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binary, "binary", "", "static linux binary of cairn (CGO_ENABLED=0); required")
	fs.StringVar(&o.image, "image", "", "destination HOST[:PORT]/REPOSITORY:TAG; required")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image platform (linux/ARCH)")
	fs.StringVar(&o.caBundle, "ca-bundle", caBundlePath, "PEM CA bundle copied into the image")
	fs.StringVar(&o.signKey, "sign-key", "", "cosign private key to sign the digest with; unsigned when empty")
	fs.StringVar(&o.registryConfig, "registry-config", "", "docker config.json holding the registry's credentials")
	fs.StringVar(&o.version, "version", "", "label org.opencontainers.image.version")
	fs.StringVar(&o.revision, "revision", "", "label org.opencontainers.image.revision (the Git commit)")
	fs.StringVar(&o.source, "source", "", "label org.opencontainers.image.source (the repository URL)")
	fs.StringVar(&o.refFile, "ref-file", "", "also write the digest reference to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.binary == "":
		return o, errors.New("-binary is required")
	case o.image == "":
		return o, errors.New("-image is required (HOST[:PORT]/REPOSITORY:TAG)")
	}
	return o, nil
}

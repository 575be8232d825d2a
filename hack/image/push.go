package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/sign"
)

// keyPasswordEnv are the variables `cairn sign` reads a key password from, in order.
var keyPasswordEnv = []string{"CAIRN_PASSWORD", "COSIGN_PASSWORD"}

// destination is where the image goes and how to reach it.
type destination struct {
	tag   name.Tag
	creds *sign.Credentials
}

// parseDestination parses -image (a tag) and reads -registry-config.
func parseDestination(opts options) (destination, error) {
	tag, err := name.NewTag(opts.image, name.StrictValidation)
	if err != nil {
		return destination{}, fmt.Errorf("-image %q is not HOST[:PORT]/REPOSITORY:TAG: %w", opts.image, err)
	}
	dst := destination{tag: tag}
	if opts.registryConfig == "" {
		return dst, nil
	}
	raw, err := os.ReadFile(opts.registryConfig)
	if err != nil {
		return dst, fmt.Errorf("failed to read -registry-config: %w", err)
	}
	dst.creds, err = sign.DockerConfigCredentials(raw, tag.RegistryStr())
	return dst, err
}

// loadSigningKey decrypts the cosign key at path with the password of the
// environment; no key without a path.
func loadSigningKey(path string) (*sign.PrivateKey, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the signing key: %w", err)
	}
	for _, env := range keyPasswordEnv {
		if password, ok := os.LookupEnv(env); ok {
			return sign.LoadPrivateKey(pem, []byte(password))
		}
	}
	return nil, fmt.Errorf("no password for %s: set %s or %s (to \"\" for none)", path, keyPasswordEnv[0], keyPasswordEnv[1])
}

// publish pushes img under dst's tag, signs its digest with key when there is one,
// and returns the digest reference.
func publish(ctx context.Context, dst destination, img v1.Image, key *sign.PrivateKey, stderr io.Writer) (string, error) {
	auth := authn.Anonymous
	if dst.creds != nil {
		auth = authn.FromConfig(authn.AuthConfig{Username: dst.creds.Username, Password: dst.creds.Password})
	}
	if err := remote.Write(dst.tag, img, remote.WithContext(ctx), remote.WithAuth(auth)); err != nil {
		return "", fmt.Errorf("failed to push %s: %w", dst.tag, err)
	}
	h, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("failed to compute the image digest: %w", err)
	}
	ref := dst.tag.Context().Digest(h.String()).String()
	fmt.Fprintf(stderr, "pushed %s as %s\n", dst.tag, ref)
	if key == nil {
		fmt.Fprintf(stderr, "not signed: no -sign-key (SIGN_KEY) given\n")
		return ref, nil
	}
	c, err := sign.NewClient(sign.Endpoint{
		Host: dst.tag.RegistryStr(), PlainHTTP: dst.tag.Scheme() == "http", Credentials: dst.creds,
	})
	if err != nil {
		return "", err
	}
	if err := c.Sign(ctx, dst.tag.RepositoryStr(), digest.Digest(h.String()), key); err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "signed %s with key %s\n", ref, key.Public().ID())
	return ref, nil
}

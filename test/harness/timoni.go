package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// TimoniArtifact is a module artifact shaped as `timoni mod push` shapes it, for
// tests: a config of ConfigMediaType and one layer (a gzipped tar) per entry of
// Layers.
type TimoniArtifact struct {
	// ConfigMediaType defaults to application/vnd.timoni.config.v1+json.
	ConfigMediaType string
	// LayerMediaType defaults to application/vnd.timoni.content.v1.tar+gzip.
	LayerMediaType string
	// Layers are the files of each layer, by slash path; Timoni puts the vendored
	// cue.mod in one layer (annotated sh.timoni.content.type: vendor) and the rest in
	// another (module).
	Layers []map[string][]byte
	// Symlinks are added to the last layer: name -> target.
	Symlinks map[string]string
	// Username and Password log in to the registry (none when empty).
	Username, Password string
}

// PushTimoniArtifact pushes a with oras-go to host/repo:tag (plain HTTP, with
// a's credentials if any) and returns the manifest digest.
func PushTimoniArtifact(ctx context.Context, host, repo, tag string, a TimoniArtifact) (string, error) {
	store := memory.New()
	config := pushed(ctx, store, orDefault(a.ConfigMediaType, "application/vnd.timoni.config.v1+json"), []byte("{}"))
	var layers []ocispec.Descriptor
	for i, files := range a.Layers {
		var links map[string]string
		if i == len(a.Layers)-1 {
			links = a.Symlinks
		}
		data, err := TarGz(files, links)
		if err != nil {
			return "", err
		}
		desc := pushed(ctx, store, orDefault(a.LayerMediaType, "application/vnd.timoni.content.v1.tar+gzip"), data)
		desc.Annotations = map[string]string{"sh.timoni.content.type": layerType(i, len(a.Layers))}
		layers = append(layers, desc)
	}
	manifest, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &config, Layers: layers,
		ManifestAnnotations: map[string]string{
			ocispec.AnnotationSource: "https://example.com/modules", ocispec.AnnotationRevision: "0000000",
			ocispec.AnnotationCreated: "2026-01-01T00:00:00Z"},
	})
	if err != nil {
		return "", fmt.Errorf("failed to pack the manifest: %w", err)
	}
	if err := store.Tag(ctx, manifest, tag); err != nil {
		return "", err
	}
	dst, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		return "", err
	}
	dst.PlainHTTP = true
	if a.Username != "" {
		dst.Client = &auth.Client{Credential: auth.StaticCredential(host, auth.Credential{Username: a.Username, Password: a.Password})}
	}
	if _, err := oras.Copy(ctx, store, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		return "", fmt.Errorf("failed to push %s/%s:%s: %w", host, repo, tag, err)
	}
	return manifest.Digest.String(), nil
}

func layerType(i, n int) string {
	if n > 1 && i == 0 {
		return "vendor"
	}
	return "module"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pushed stores data in store and returns its descriptor; a memory store fails
// only on a repeated push, which is harmless here.
func pushed(ctx context.Context, store *memory.Store, mediaType string, data []byte) ocispec.Descriptor {
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	_ = store.Push(ctx, desc, bytes.NewReader(data))
	return desc
}

// TarGz writes files and symbolic links as a gzipped tar, sorted by name.
func TarGz(files map[string][]byte, links map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(links)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Linkname: links[name], Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

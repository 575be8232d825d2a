package sign

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The media types of a Timoni module artifact (`timoni mod push`).
const (
	// TimoniConfigMediaType is the media type of a Timoni module's manifest config.
	TimoniConfigMediaType = "application/vnd.timoni.config.v1+json"
	// TimoniContentMediaType is the media type of each layer: a gzipped tar of
	// (part of) the module directory.
	TimoniContentMediaType = "application/vnd.timoni.content.v1.tar+gzip"
)

// Caps on a Timoni module artifact, besides MaxManifestBytes.
const (
	// MaxTimoniLayerBytes caps one compressed layer.
	MaxTimoniLayerBytes = 32 << 20
	// MaxTimoniBytes caps the files of all layers, unpacked.
	MaxTimoniBytes = 64 << 20
	// MaxTimoniFiles caps the number of files of all layers.
	MaxTimoniFiles = 10000
)

// PullTimoniModule returns the files of the Timoni module manifest dgst of repo,
// relative to the module root: its layers (Timoni may put the vendored cue.mod in a
// layer of its own) are extracted into one set of files. The config must have
// TimoniConfigMediaType and every layer TimoniContentMediaType (InvalidArtifact
// otherwise, naming the media type found); manifest and layers are checked against
// their digests. A tar entry must be a regular file or a directory with a clean
// relative name (no "..", no absolute name, no backslash): a link or any other kind of
// entry is InvalidArtifact, naming it. Sizes are capped (MaxTimoniLayerBytes,
// MaxTimoniBytes, MaxTimoniFiles: TooLarge).
func (c *Client) PullTimoniModule(ctx context.Context, repo string, dgst digest.Digest) (map[string][]byte, error) {
	ref := c.ref(repo, dgst.String())
	_, m, err := c.fetchManifest(ctx, repo, dgst)
	if err != nil {
		return nil, err
	}
	if err := checkTimoniManifest(m); err != nil {
		return nil, newError(ReasonInvalidArtifact, "pull Timoni module", ref, err)
	}
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	x := &tarExtractor{files: map[string][]byte{}}
	for _, l := range m.Layers {
		data, err := c.fetchBlob(ctx, r, repo, l, MaxTimoniLayerBytes)
		if err != nil {
			return nil, err
		}
		if err := x.extract(data); err != nil {
			return nil, newError(reasonOfTar(err), "pull Timoni module", ref, fmt.Errorf("layer %s: %w", l.Digest, err))
		}
	}
	return x.files, nil
}

// checkTimoniManifest refuses a manifest that is not a Timoni module's.
func checkTimoniManifest(m *ocispec.Manifest) error {
	if m.Config.MediaType != TimoniConfigMediaType {
		return fmt.Errorf("config media type %q is not a Timoni module's (%s): is it a Timoni module? (a Helm chart is module.chart)",
			m.Config.MediaType, TimoniConfigMediaType)
	}
	if len(m.Layers) == 0 {
		return errors.New("manifest has no layers")
	}
	for _, l := range m.Layers {
		if l.MediaType != TimoniContentMediaType {
			return fmt.Errorf("layer %s has media type %q, not %s", l.Digest, l.MediaType, TimoniContentMediaType)
		}
	}
	return nil
}

// errTarTooLarge marks a tar over the caps.
var errTarTooLarge = errors.New("module exceeds the caps")

func reasonOfTar(err error) string {
	if errors.Is(err, errTarTooLarge) {
		return ReasonTooLarge
	}
	return ReasonInvalidArtifact
}

// tarExtractor extracts gzipped tars into one set of files, within the caps.
type tarExtractor struct {
	files map[string][]byte
	total int64
}

func (x *tarExtractor) extract(data []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a gzip stream: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		if err := x.entry(h, tr); err != nil {
			return err
		}
	}
}

// entry adds one tar entry: directories are implied by files, anything but a
// regular file or a directory is refused.
func (x *tarExtractor) entry(h *tar.Header, r io.Reader) error {
	name, err := cleanEntryName(h.Name)
	if err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return nil
	case tar.TypeReg:
	case tar.TypeSymlink, tar.TypeLink:
		return fmt.Errorf("entry %q is a link (to %q): links are not allowed in a module", h.Name, h.Linkname)
	default:
		return fmt.Errorf("entry %q is not a regular file or a directory (type %q)", h.Name, h.Typeflag)
	}
	if _, dup := x.files[name]; dup {
		return fmt.Errorf("entry %q appears twice", h.Name)
	}
	if len(x.files) >= MaxTimoniFiles {
		return fmt.Errorf("%w: more than %d files", errTarTooLarge, MaxTimoniFiles)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxTimoniBytes-x.total+1))
	if err != nil {
		return fmt.Errorf("failed to read entry %q: %w", h.Name, err)
	}
	if x.total += int64(len(data)); x.total > MaxTimoniBytes {
		return fmt.Errorf("%w: more than %d bytes unpacked", errTarTooLarge, MaxTimoniBytes)
	}
	x.files[name] = data
	return nil
}

// cleanEntryName returns a tar entry's name as a clean relative slash path.
func cleanEntryName(name string) (string, error) {
	trimmed := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	clean := path.Clean(trimmed)
	switch {
	case name == "" || strings.Contains(name, `\`) || path.IsAbs(name):
	case clean != trimmed || clean == ".." || strings.HasPrefix(clean, "../"):
	default:
		return clean, nil
	}
	return "", fmt.Errorf("entry %q is not a clean relative path inside the module", name)
}

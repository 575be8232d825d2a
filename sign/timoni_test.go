package sign

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/test/harness"
)

// TestPullTimoniModule pulls artifacts shaped as `timoni mod push` shapes them
// (pushed with oras-go): the layers are extracted into one module; other media
// types, links and unsafe names are refused, naming what was found.
func TestPullTimoniModule(t *testing.T) {
	vendor := map[string][]byte{"cue.mod/module.cue": []byte("module: \"x.test/m\"\n"), "cue.mod/pkg/a/a.cue": []byte("package a\n")}
	module := map[string][]byte{"timoni.cue": []byte("package main\n"), "templates/config.cue": []byte("package templates\n")}
	tests := []struct {
		name     string
		artifact harness.TimoniArtifact
		want     map[string][]byte
		reason   string
		message  string
	}{
		{name: "two layers", artifact: harness.TimoniArtifact{Layers: []map[string][]byte{vendor, module}},
			want: map[string][]byte{"cue.mod/module.cue": vendor["cue.mod/module.cue"], "cue.mod/pkg/a/a.cue": vendor["cue.mod/pkg/a/a.cue"],
				"timoni.cue": module["timoni.cue"], "templates/config.cue": module["templates/config.cue"]}},
		{name: "a helm chart", artifact: harness.TimoniArtifact{ConfigMediaType: "application/vnd.cncf.helm.config.v1+json", Layers: []map[string][]byte{module}},
			reason: ReasonInvalidArtifact, message: `config media type "application/vnd.cncf.helm.config.v1+json" is not a Timoni module's (application/vnd.timoni.config.v1+json)`},
		{name: "wrong layer type", artifact: harness.TimoniArtifact{LayerMediaType: "application/octet-stream", Layers: []map[string][]byte{module}},
			reason: ReasonInvalidArtifact, message: `media type "application/octet-stream", not application/vnd.timoni.content.v1.tar+gzip`},
		{name: "symbolic link", artifact: harness.TimoniArtifact{Layers: []map[string][]byte{module}, Symlinks: map[string]string{"cue.mod/pkg/k8s": "../gen"}},
			reason: ReasonInvalidArtifact, message: `entry "cue.mod/pkg/k8s" is a link (to "../gen")`},
		{name: "parent name", artifact: harness.TimoniArtifact{Layers: []map[string][]byte{{"../escape.cue": []byte("x")}}},
			reason: ReasonInvalidArtifact, message: `entry "../escape.cue" is not a clean relative path`},
		{name: "same file twice", artifact: harness.TimoniArtifact{Layers: []map[string][]byte{module, module}},
			reason: ReasonInvalidArtifact, message: `entry "templates/config.cue" appears twice`},
	}
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			dgst, err := harness.PushTimoniArtifact(ctx, reg.host(), "modules/x", "1.0.0", tt.artifact)
			g.Expect(err).NotTo(HaveOccurred())
			desc, err := c.Resolve(ctx, "modules/x", "1.0.0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(desc.Digest.String()).To(Equal(dgst))
			files, err := c.PullTimoniModule(ctx, "modules/x", digest.Digest(dgst))
			if tt.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(files).To(Equal(tt.want))
				return
			}
			g.Expect(Reason(err)).To(Equal(tt.reason), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			g.Expect(err.Error()).To(ContainSubstring("modules/x@" + dgst))
		})
	}
}

// FuzzTimoniLayer: extracting a layer never panics; what it keeps are clean relative
// paths within the caps, and it fails only with InvalidArtifact or TooLarge.
func FuzzTimoniLayer(f *testing.F) {
	for _, files := range []map[string][]byte{{"timoni.cue": []byte("package main\n")}, {"a/../b": []byte("x")}, {}} {
		data, err := harness.TarGz(files, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	link, _ := harness.TarGz(nil, map[string]string{"l": "/etc/passwd"})
	f.Add(link)
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		x := &tarExtractor{files: map[string][]byte{}}
		if err := x.extract(data); err != nil {
			if r := reasonOfTar(err); r != ReasonInvalidArtifact && r != ReasonTooLarge {
				t.Fatalf("reason %q", r)
			}
			return
		}
		for name := range x.files {
			if clean, err := cleanEntryName(name); err != nil || clean != name {
				t.Fatalf("kept an unclean name %q", name)
			}
		}
		if x.total > MaxTimoniBytes || len(x.files) > MaxTimoniFiles {
			t.Fatalf("over the caps: %d bytes, %d files", x.total, len(x.files))
		}
	})
}

package supply

import (
	"context"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// OCIRef is a parsed module.chart or OCI module.timoni.
type OCIRef struct {
	// Host and Repo locate the artifact (registry host, repository path).
	Host, Repo string
	// Tag is the version (Helm's "+" is "_" in OCI tags).
	Tag string
	// Digest pins the artifact when declared ("" otherwise).
	Digest string
}

// ParseChart parses a chart's url, version and digest.
func ParseChart(c *cairnv1.ChartSource) (OCIRef, error) {
	return parseOCI("chart", c.URL, c.Version, c.Digest)
}

// ParseTimoni parses an OCI Timoni module (one with a url).
func ParseTimoni(m *cairnv1.TimoniModule) (OCIRef, error) {
	return parseOCI("Timoni module", m.URL, m.Version, m.Digest)
}

// parseOCI parses the url, version and digest of an OCI artifact of kind what.
func parseOCI(what, url, version, dgst string) (OCIRef, error) {
	rest, ok := strings.CutPrefix(url, "oci://")
	if !ok {
		return OCIRef{}, fmt.Errorf("%s url %q is not oci://host/repository", what, url)
	}
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" || strings.Contains(repo, "@") || strings.Contains(repo, ":") {
		return OCIRef{}, fmt.Errorf("%s url %q is not oci://host/repository (put the version in version: and the digest in digest:)", what, url)
	}
	ref := OCIRef{Host: host, Repo: strings.TrimSuffix(repo, "/"), Tag: strings.ReplaceAll(version, "+", "_"), Digest: dgst}
	if ref.Digest != "" {
		if _, err := digest.Parse(ref.Digest); err != nil {
			return OCIRef{}, fmt.Errorf("%s digest %q: %w", what, ref.Digest, err)
		}
	}
	if ref.Tag == "" && ref.Digest == "" {
		return OCIRef{}, fmt.Errorf("%s %s needs a version or a digest", what, url)
	}
	return ref, nil
}

// Artifact is a verified OCI artifact to pull by digest: a chart or a Timoni module.
type Artifact struct {
	// Ref is the artifact as declared.
	Ref OCIRef
	// Digest is what Ref resolved to and was checked as.
	Digest string
	st     *registryState
}

// Display names the artifact by digest: oci://host/repo@digest.
func (a *Artifact) Display() string {
	return "oci://" + a.Ref.Host + "/" + a.Ref.Repo + "@" + a.Digest
}

// PullChart pulls the chart archive (.tgz) by digest; its error is an
// *outcome.Failure.
func (a *Artifact) PullChart(ctx context.Context) ([]byte, error) {
	archive, err := a.st.client.PullChart(ctx, a.Ref.Repo, digest.Digest(a.Digest))
	if err != nil {
		return nil, artifactFailure(err)
	}
	return archive, nil
}

// PullTimoniModule pulls the Timoni module's files by digest; its error is an
// *outcome.Failure.
func (a *Artifact) PullTimoniModule(ctx context.Context) (map[string][]byte, error) {
	files, err := a.st.client.PullTimoniModule(ctx, a.Ref.Repo, digest.Digest(a.Digest))
	if err != nil {
		return nil, artifactFailure(err)
	}
	return files, nil
}

// VerifyOCI resolves and checks the chart or OCI Timoni module of ref once per sync,
// from the Registry declared for its host. It returns the artifact's status (none
// when no Registry declares the host) and, when it may be pulled, the Artifact.
func (sc *Chain) VerifyOCI(ctx context.Context, ref OCIRef) ([]cairnv1.ArtifactStatus, *Artifact, *outcome.Failure) {
	st, f := sc.registryForHost(ref.Host)
	if f != nil {
		return nil, nil, f
	}
	res := sc.resolveOCI(ctx, st, ref)
	out := []cairnv1.ArtifactStatus{res.status}
	if res.fail != nil {
		return out, nil, res.fail
	}
	return out, &Artifact{Ref: ref, st: st, Digest: res.status.Digest}, nil
}

// VerifyModules resolves and checks the CUE modules (a registry module and the
// catalogs) from the Registry named registry, in order, once per sync. It stops at
// the first that fails; a Registry that is not declared checks nothing (the renderer
// reports it).
func (sc *Chain) VerifyModules(ctx context.Context, registry string, mods []render.Catalog) ([]cairnv1.ArtifactStatus, *outcome.Failure) {
	st := sc.regs[registry]
	if st == nil {
		return nil, nil
	}
	var out []cairnv1.ArtifactStatus
	for _, mod := range mods {
		res := sc.resolve(ctx, st, render.ModuleRepository(render.ModuleRegistry{}, mod.Module), mod.Version)
		out = append(out, res.status)
		if res.fail != nil {
			return out, res.fail
		}
	}
	return out, nil
}

// resolveOCI resolves the chart's (or OCI Timoni module's) version once per sync. A
// declared digest is what is verified and pulled; with a version too, the version must
// still resolve to it.
func (sc *Chain) resolveOCI(ctx context.Context, st *registryState, ref OCIRef) *resolution {
	if ref.Digest == "" {
		return sc.resolve(ctx, st, ref.Repo, ref.Tag)
	}
	if ref.Tag != "" && st.failure == nil {
		desc, err := st.client.Resolve(ctx, ref.Repo, ref.Tag)
		var f *outcome.Failure
		switch {
		case err != nil:
			f = artifactFailure(err)
		case desc.Digest.String() != ref.Digest:
			f = outcome.NewStalled(cairnv1.ReasonArtifactFailed, fmt.Errorf("%s:%s resolves to %s, not the declared digest %s",
				ref.Host+"/"+ref.Repo, ref.Tag, desc.Digest, ref.Digest))
		}
		if f != nil {
			return &resolution{fail: f, status: cairnv1.ArtifactStatus{
				Ref: ref.Host + "/" + ref.Repo + ":" + ref.Tag, Digest: desc.Digest.String(),
				Verification: cairnv1.VerificationFailed, Reason: f.Reason, Message: f.Error()}}
		}
	}
	return sc.resolve(ctx, st, ref.Repo, ref.Digest)
}

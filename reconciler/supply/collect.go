package supply

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/sign"
)

// Tags of an instance's render repository that a collection may delete: a render
// (its render digest, ":" as "-") and a cosign signature ("sha256-<hex>.sig").
// Any other tag is someone else's and left alone.
var (
	renderTagPattern    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*-[0-9a-f]{32,}$`)
	signatureTagPattern = regexp.MustCompile(`^sha256-[0-9a-f]{64}\.sig$`)
)

// RenderTag is the tag of a render in its instance's repository: its render digest
// with ":" as "-".
func RenderTag(renderDigest string) string { return strings.ReplaceAll(renderDigest, ":", "-") }

// instanceRepository is the repository of an instance's published renders.
func instanceRepository(repository, namespace, name string) string {
	return strings.Trim(repository, "/") + "/" + namespace + "/" + name
}

// KeptRenders are the render digests whose published artifacts stay: those of the
// newest keep entries of history, the render just applied, and held (renders a
// hold or rollback names). Without repeats, in that order.
func KeptRenders(history []cairnv1.HistoryEntry, keep int, applied string, held []string) []string {
	var out []string
	seen := map[string]bool{"": true}
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	add(applied)
	for _, h := range history[:min(len(history), max(keep, 0))] {
		add(h.RenderDigest)
	}
	for _, d := range held {
		add(d)
	}
	return out
}

// Garbage is what a collection deletes of a render repository holding tags: the
// render tags not in keep, and the signature tags of manifests not in
// keptManifests (the digests the kept render tags resolve to). Tags of any other
// shape are not cairn's and stay.
func Garbage(tags []string, keep, keptManifests map[string]bool) (renders, signatures []string) {
	for _, tag := range tags {
		switch {
		case signatureTagPattern.MatchString(tag):
			if !keptManifests[signedDigest(tag)] {
				signatures = append(signatures, tag)
			}
		case renderTagPattern.MatchString(tag) && !keep[tag]:
			renders = append(renders, tag)
		}
	}
	return renders, signatures
}

// signedDigest is the manifest digest a signature tag signs.
func signedDigest(sigTag string) string {
	return strings.Replace(strings.TrimSuffix(sigTag, ".sig"), "-", ":", 1)
}

// Collection is one instance's published renders to collect.
type Collection struct {
	// Registry and Repository are the Platform's render.publish; Namespace and
	// Name the instance's.
	Registry, Repository, Namespace, Name string
	// Keep are the render digests whose artifacts stay (see KeptRenders).
	Keep []string
}

// Collected is what a collection deleted: the render tags and signature tags whose
// manifests it deleted.
type Collected struct {
	Renders, Signatures []string
}

// CollectRenders deletes from the instance's render repository the artifacts of
// the renders c does not keep, and their signatures, by manifest digest (see
// Garbage). A render tag that resolves to a kept manifest is left. It stops at the
// first error of a delete the registry refuses (sign.ReasonUnsupported,
// Unauthorized) and returns it; others are returned after the rest is tried.
func (sc *Chain) CollectRenders(ctx context.Context, c Collection) (Collected, error) {
	access, f := sc.Registry(c.Registry)
	if f != nil {
		return Collected{}, f
	}
	oci, repo := access.Client, instanceRepository(c.Repository, c.Namespace, c.Name)
	tags, err := oci.Tags(ctx, repo)
	if err != nil {
		return Collected{}, err
	}
	keep, kept := map[string]bool{}, map[string]bool{}
	for _, d := range c.Keep {
		keep[RenderTag(d)] = true
	}
	for _, tag := range tags {
		if keep[tag] {
			desc, err := oci.Resolve(ctx, repo, tag)
			if err != nil {
				return Collected{}, fmt.Errorf("failed to resolve the kept render %s: %w", tag, err)
			}
			kept[desc.Digest.String()] = true
		}
	}
	renders, signatures := Garbage(tags, keep, kept)
	var out Collected
	var last error
	for _, tag := range append(renders, signatures...) {
		deleted, err := deleteTagged(ctx, oci, repo, tag, kept)
		if refused(err) {
			return out, err
		}
		if err != nil {
			last = err
			continue
		}
		if deleted && strings.HasSuffix(tag, ".sig") {
			out.Signatures = append(out.Signatures, tag)
		} else if deleted {
			out.Renders = append(out.Renders, tag)
		}
	}
	return out, last
}

// deleteTagged deletes the manifest tag resolves to, unless it is a kept one; a
// tag that resolves to nothing (deleted before, on a registry that keeps tags)
// is done.
func deleteTagged(ctx context.Context, oci *sign.Client, repo, tag string, kept map[string]bool) (bool, error) {
	desc, err := oci.Resolve(ctx, repo, tag)
	if sign.Reason(err) == sign.ReasonNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if kept[desc.Digest.String()] {
		return false, nil
	}
	return true, oci.Delete(ctx, repo, desc.Digest)
}

// refused reports whether err is the registry refusing deletes for good: a
// collection stops there.
func refused(err error) bool {
	r := sign.Reason(err)
	return r == sign.ReasonUnsupported || r == sign.ReasonUnauthorized
}

// DeletesRefused reports whether err says the registry does not allow deletes.
func DeletesRefused(err error) bool { return sign.Reason(err) == sign.ReasonUnsupported }

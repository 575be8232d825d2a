package rendertask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/opencontainers/go-digest"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// Media types and annotations of a task's result.
const (
	ResultArtifactType = "application/vnd.cairn.render-result.v1+json"
	ResultMedia        = "application/vnd.cairn.render-result.v1+json"
	ResultFile         = "result.json"

	AnnotationInput    = "dev.cairn.render-input"
	AnnotationInstance = "dev.cairn.instance"
	AnnotationRevision = "org.opencontainers.image.revision"
)

// ErrUnavailable marks a task's failure that is not its render's: the publish
// Registry could not be read or written. The task's termination message says
// "unavailable: " for it, "error: " for a render's own failure, so that the
// controller retries the first as transient.
var ErrUnavailable = errors.New("registry unavailable")

// Spec is what one task renders: the config Secret of its Job holds it, as JSON. It
// holds no credential: the Job's pod mounts the publish Registry's docker config
// (and the module registry's, for a render that reads it) beside it.
type Spec struct {
	// Namespace and Name are the instance's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// InputDigest is the digest of everything the render reads (the instance's
	// input digest): the result names it, and the controller takes no result that
	// names another. Revision is the commit rendered.
	InputDigest string `json:"inputDigest"`
	Revision    string `json:"revision"`
	// Registry is the publish Registry, which serves the source and takes the
	// result; Source is the source artifact's repository in it and Digest its
	// manifest's digest; Result is the repository the result is pushed to.
	Registry     Endpoint `json:"registry"`
	Source       string   `json:"source"`
	SourceDigest string   `json:"sourceDigest"`
	Result       string   `json:"result"`
	// ModuleRegistry serves CUE modules and catalogs to the render (nil: it reads
	// none).
	ModuleRegistry *ModuleRegistry `json:"moduleRegistry,omitempty"`
	// Request is the render request, without what the pod supplies: the source
	// (the artifact), the module registry's credentials and a cache directory.
	Request Request `json:"request"`
	// PublicKey seals the data of the rendered Secrets (see Seal), base64.
	PublicKey string `json:"publicKey"`
}

// Endpoint is a registry the task talks to; its credentials and CA are mounted.
type Endpoint struct {
	Host      string `json:"host"`
	PlainHTTP bool   `json:"plainHTTP,omitempty"`
}

// ModuleRegistry is the registry of CUE modules.
type ModuleRegistry struct {
	Endpoint
	Prefix string `json:"prefix,omitempty"`
}

// Request is the part of a render.Request a Spec carries.
type Request struct {
	LocalPath     string               `json:"localPath,omitempty"`
	KustomizePath string               `json:"kustomizePath,omitempty"`
	CUEModule     *render.CUEModuleRef `json:"cueModule,omitempty"`
	// Timoni is a Timoni module: at its Path in the source, or, pulled from a
	// registry (Ref and Digest set), its files under ModuleDir of the source.
	Timoni *render.TimoniModule `json:"timoni,omitempty"`
	// Chart is a chart, its archive ChartFile of the source.
	Chart      *Chart               `json:"chart,omitempty"`
	Values     json.RawMessage      `json:"values,omitempty"`
	Catalogs   []render.Catalog     `json:"catalogs,omitempty"`
	SkewPolicy string               `json:"skewPolicy,omitempty"`
	Tenants    []render.TenantPaths `json:"tenants,omitempty"`
	Tenant     string               `json:"tenant,omitempty"`
	Limits     render.Limits        `json:"limits"`
}

// Chart is a chart a task renders: its archive, pulled and verified by the
// controller, travels in the source artifact (ChartFile).
type Chart struct {
	// Ref names the chart in errors; Digest is its manifest digest.
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Capabilities are what the chart sees of the cluster, as in-process.
	Capabilities *render.Capabilities `json:"capabilities,omitempty"`
}

// Where a module pulled from a registry sits in a task's source: a chart's
// archive, a Timoni module's files. Such a source holds nothing else (no file
// of the repository), so no repository path can take these names.
const (
	ChartFile = "chart.tgz"
	ModuleDir = "module"
)

// RequestOf is the part of req a Spec carries; chart is the chart req renders
// (nil: none), whose archive the source carries.
func RequestOf(req render.Request, chart *Chart) Request {
	q := Request{LocalPath: req.LocalPath, KustomizePath: req.KustomizePath, CUEModule: req.CUEModule, Values: req.Values,
		Catalogs: req.Catalogs, SkewPolicy: req.SkewPolicy, Tenants: req.Tenants, Tenant: req.Tenant, Limits: req.Limits}
	if req.Timoni != nil {
		t := *req.Timoni
		t.Files = nil
		q.Timoni = &t
	}
	if chart != nil {
		c := *chart
		c.Capabilities = req.Capabilities
		q.Chart = &c
	}
	return q
}

// renderRequest is the render.Request of s over source.
func (s *Spec) renderRequest(source fs.FS, reg *render.ModuleRegistry, cacheDir string) (render.Request, error) {
	q := s.Request
	req := render.Request{Name: s.Name, Namespace: s.Namespace, Source: source, Tenants: q.Tenants, LocalPath: q.LocalPath,
		KustomizePath: q.KustomizePath, CUEModule: q.CUEModule, Values: q.Values, Catalogs: q.Catalogs, SkewPolicy: q.SkewPolicy,
		Registry: reg, CacheDir: cacheDir, Limits: q.Limits, Tenant: q.Tenant}
	if q.Timoni != nil {
		t := *q.Timoni
		if t.Digest != "" { // pulled from a registry: its files are ModuleDir of the source
			files, err := readTree(source, ModuleDir)
			if err != nil {
				return req, err
			}
			t.Files = files
		}
		req.Timoni = &t
	}
	return req, nil
}

// readTree reads the regular files under dir of fsys, by their paths relative to
// dir.
func readTree(fsys fs.FS, dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err == nil {
			files[strings.TrimPrefix(p, dir+"/")] = data
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("source artifact: %w", err)
	}
	return files, nil
}

// render renders s over source, as the controller does in-process: a chart
// through Renderer.RenderChart (its `lookup` sees nothing: the pod holds no API
// token, as `helm template`), anything else through Renderer.Render.
func (s *Spec) render(ctx context.Context, env Env, source fs.FS, cacheDir string) (*render.Result, error) {
	if c := s.Request.Chart; c != nil {
		archive, err := fs.ReadFile(source, ChartFile)
		if err != nil {
			return nil, fmt.Errorf("source artifact: %w", err)
		}
		q := s.Request
		return env.Renderer.RenderChart(ctx, render.ChartRequest{Name: s.Name, Namespace: s.Namespace, Chart: c.Ref,
			Archive: archive, Digest: c.Digest, Values: q.Values, Limits: q.Limits, Capabilities: c.Capabilities, Tenant: q.Tenant})
	}
	var reg *render.ModuleRegistry
	if s.ModuleRegistry != nil {
		reg = env.ModuleRegistry
	}
	req, err := s.renderRequest(source, reg, cacheDir)
	if err != nil {
		return nil, err
	}
	return env.Renderer.Render(ctx, req)
}

// Env is what a task's pod gives it besides its Spec.
type Env struct {
	// Registry talks to the publish Registry with its push credentials.
	Registry *sign.Client
	// ModuleRegistry is the module registry with its credentials, for a Spec
	// that names one.
	ModuleRegistry *render.ModuleRegistry
	// Renderer renders, as the controller's own renders do.
	Renderer *render.Renderer
	// TempDir takes the unpacked source and the module cache.
	TempDir string
}

// Run renders s: it pulls the source artifact, renders it, seals the rendered
// Secrets' data to s.PublicKey and pushes the whole render as the result artifact,
// tagged by the input digest and annotated with it, the instance and the revision.
// It returns the result's manifest digest; a render error is returned as the
// render returned it (with its file and line).
func Run(ctx context.Context, s *Spec, env Env) (digest.Digest, error) {
	pub, err := DecodeKey(s.PublicKey)
	if err != nil {
		return "", err
	}
	dgst, err := digest.Parse(s.SourceDigest)
	if err != nil {
		return "", fmt.Errorf("source digest: %w", err)
	}
	files, _, err := env.Registry.PullArtifact(ctx, s.Source, dgst)
	if err != nil {
		return "", fmt.Errorf("%w: failed to pull the source: %w", ErrUnavailable, err)
	}
	var tarball []byte
	for _, f := range files {
		if f.Name == SourceFile {
			tarball = f.Data
		}
	}
	if tarball == nil {
		return "", fmt.Errorf("the source artifact %s@%s holds no %s", s.Source, dgst, SourceFile)
	}
	srcDir, err := os.MkdirTemp(env.TempDir, "source-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(srcDir)
	source, err := UnpackSource(tarball, srcDir)
	if err != nil {
		return "", err
	}
	cacheDir, err := os.MkdirTemp(env.TempDir, "cache-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(cacheDir)
	res, err := s.render(ctx, env, source, cacheDir)
	if err != nil {
		return "", err
	}
	if err := Seal(res, pub); err != nil {
		return "", err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	desc, _, err := env.Registry.PushArtifact(ctx, s.Result, Tag(s.InputDigest), ResultArtifactType,
		[]sign.File{{Name: ResultFile, MediaType: ResultMedia, Data: data}}, s.annotations())
	if err != nil {
		return "", fmt.Errorf("%w: failed to push the result: %w", ErrUnavailable, err)
	}
	return desc.Digest, nil
}

func (s *Spec) annotations() map[string]string {
	return map[string]string{AnnotationInput: s.InputDigest, AnnotationInstance: s.Namespace + "/" + s.Name, AnnotationRevision: s.Revision}
}

// Tag is the tag of a digest in a task's repositories ("sha256:..." ->
// "sha256-..."): a source's by its content, a result's by its input digest.
func Tag(d string) string { return strings.ReplaceAll(d, ":", "-") }

// tagPattern is the shape of Tag's tags.
var tagPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*-[0-9a-f]{32,}$`)

// IsTag tells whether tag has the shape of Tag's tags (any other is not cairn's).
func IsTag(tag string) bool { return tagPattern.MatchString(tag) }

// Fetch pulls the result dgst of the task s from the publish Registry, checks
// that its annotations name s's input, instance and revision, and opens its
// sealed data with key: the render as the task made it.
func Fetch(ctx context.Context, c *sign.Client, s *Spec, dgst digest.Digest, key Key) (*render.Result, error) {
	files, ann, err := c.PullArtifact(ctx, s.Result, dgst)
	if err != nil {
		return nil, fmt.Errorf("failed to pull the render: %w", err)
	}
	for k, want := range s.annotations() {
		if ann[k] != want {
			return nil, fmt.Errorf("the render %s@%s is not of this task: its %s is %q, not %q", s.Result, dgst, k, ann[k], want)
		}
	}
	var data []byte
	for _, f := range files {
		if f.Name == ResultFile {
			data = f.Data
		}
	}
	if data == nil {
		return nil, fmt.Errorf("the render %s@%s holds no %s", s.Result, dgst, ResultFile)
	}
	var res render.Result
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("the render %s@%s: %w", s.Result, dgst, err)
	}
	if err := check(&res, key, s.Request.Chart != nil); err != nil {
		return nil, fmt.Errorf("the render %s@%s: %w", s.Result, dgst, err)
	}
	return &res, nil
}

// Bounds of what a task's result may say besides its objects.
const (
	maxWarnings     = 32
	maxWarningBytes = 1024
)

// check opens res with key and takes nothing the task says of it on trust: every
// object is one (no null), every Secret's data was sealed (a result whose Secret
// data is in the clear was not made for this task's key), the digest is the
// digest of the objects, there are no hooks unless a chart was rendered (no other
// kind has any), no lookups, and the warnings are bounded.
func check(res *render.Result, key Key, chart bool) error {
	for _, u := range resultObjects(res) {
		if u == nil || u.Object == nil {
			return errors.New("it holds an empty object")
		}
		if isSecret(u) && (u.Object["data"] != nil || u.Object["stringData"] != nil) {
			return fmt.Errorf("Secret %s/%s carries its data unsealed", u.GetNamespace(), u.GetName())
		}
	}
	if len(res.Hooks) > 0 && !chart {
		return errors.New("it holds Helm hooks, which only a chart has")
	}
	if err := Open(res, key); err != nil {
		return err
	}
	d, err := render.ResultDigest(res.Objects, res.Hooks)
	if err != nil {
		return err
	}
	if d != res.Digest {
		return fmt.Errorf("its digest %q is not the digest of its objects", res.Digest)
	}
	res.Lookups = 0
	if len(res.Warnings) > maxWarnings {
		res.Warnings = append(res.Warnings[:maxWarnings], fmt.Sprintf("%d more warnings left out", len(res.Warnings)-maxWarnings))
	}
	for i, w := range res.Warnings {
		if len(w) > maxWarningBytes {
			res.Warnings[i] = w[:maxWarningBytes] + "…"
		}
	}
	return nil
}

// PushSource pushes the source tar PackSource made to repo, tagged by its own
// content, and returns its manifest digest.
func PushSource(ctx context.Context, c *sign.Client, repo string, tarball []byte) (digest.Digest, error) {
	tag := Tag(digest.FromBytes(tarball).String())
	desc, _, err := c.PushArtifact(ctx, repo, tag, SourceArtifactType, []sign.File{{Name: SourceFile, MediaType: SourceMedia, Data: tarball}}, nil)
	if err != nil {
		return "", err
	}
	return desc.Digest, nil
}

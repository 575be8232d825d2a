package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Reasons of chart renders, besides those in errors.go that charts share with
// CUE modules (RenderFailed, InvalidObject, LimitExceeded, RenderTimeout).
const (
	// ReasonChartInvalid: the chart archive or the chart is malformed or
	// unsafe: an archive entry that is not a regular file, has an absolute
	// name, a backslash or a ".." element, or lies outside the chart's
	// directory; a chart name with a path in it; a library chart; a
	// dependency missing from charts/; a kubeVersion the render's Kubernetes
	// version does not satisfy; a values.schema.json that is not JSON or
	// reaches outside the chart ($ref, $dynamicRef, $recursiveRef or $schema).
	ReasonChartInvalid = "ChartInvalid"
	// ReasonValuesInvalid: the values of a chart instance are not a JSON
	// object, or violate a values.schema.json of the chart or its subcharts.
	ReasonValuesInvalid = "ValuesInvalid"
)

// chartSlots bounds the chart renders whose goroutine is still running,
// including those abandoned at their deadline (templates cannot be
// interrupted).
var chartSlots = make(chan struct{}, boundedSlots())

// chartEnv is what chart renders share: the archive caps and the render
// slots. Tests use their own.
type chartEnv struct {
	caps  archiveLimits
	slots chan struct{}
}

// ChartRequest is one chart instance to render. The caller has already
// resolved the chart's tag to a digest, verified its signature and pulled
// the archive by that digest.
type ChartRequest struct {
	// Name and Namespace identify the instance: they are the release name
	// and namespace, and Namespace is given to namespaced objects that have
	// none.
	Name, Namespace string
	// Chart names the chart in errors, e.g.
	// "oci://registry.example.com/charts/podinfo@sha256:...".
	Chart string
	// Archive is the chart archive (.tgz) as pulled.
	Archive []byte
	// Digest is the chart's manifest digest; it becomes Result.ModuleDigest.
	Digest string
	// Values is a JSON object of Helm values; nil means none.
	Values []byte
	// Limits bound the render; zero fields mean DefaultLimits.
	Limits Limits
	// Capabilities are what the chart sees of the cluster (nil: `helm
	// template`'s defaults).
	Capabilities *Capabilities
	// Lookup reads the live cluster for the chart's `lookup` (nil: `lookup`
	// returns an empty map, as in `helm template`). In a worker process, the
	// worker asks the parent, which calls it.
	Lookup Lookup `json:"-"`
	// Tenant owns the instance ("" for the platform team's): renders take the
	// Renderer's worker processes in turn by tenant (see RendererOptions).
	Tenant string `json:"-"`
}

// RenderChart renders a Helm chart archive with the Helm SDK (v3) as
// `helm install` would, without a cluster, and returns its objects ordered
// and digested like those of a CUE module.
//
// Archive: the archive may be at most 10 MiB; it is unpacked in memory,
// subchart archives (charts/*.tgz) included, within one budget: at most
// 5 MiB per file, 100 MiB and 5000 entries in all, subcharts nested at most
// 10 deep (LimitExceeded). Entries must be regular files or directories
// inside the chart's directory, with relative names free of ".." and
// backslashes (ChartInvalid, naming the entry). Chart names (Chart.yaml
// `name`, subcharts' too) must not contain "/", "\" or "..". Library charts,
// dependencies of Chart.yaml missing from charts/ and a kubeVersion that
// excludes the Kubernetes version of req.Capabilities (DefaultKubeVersion
// without one) are ChartInvalid, naming the chart, its kubeVersion and the
// Kubernetes version.
//
// Values: Values is a JSON object (at most 4 MiB) coalesced with the chart's
// values.yaml; dependencies are enabled by their condition and tags and
// import-values apply, as in Helm. The values must satisfy the
// values.schema.json of the chart and of its subcharts (ValuesInvalid, with
// Helm's message naming the field). Before Helm compiles a schema, every
// values.schema.json is checked: at most 1 MiB and 100 levels deep
// (LimitExceeded), and every $ref, $dynamicRef and $recursiveRef must be a
// reference inside the schema ("#...") and $schema one of the JSON Schema
// drafts (ChartInvalid, naming the file and the reference): schemas never
// reach files, URLs or other charts.
//
// Templates: rendered by helm.sh/helm/v3/pkg/engine with release options
// {Name, Namespace, Revision 1, IsInstall} and req.Capabilities in
// .Capabilities (KubeVersion, APIVersions; Helm's defaults with
// DefaultKubeVersion for those it leaves empty). `lookup` reads the cluster
// through req.Lookup, read-only, each read counted in Result.Lookups (without
// one, it returns an empty object, as in `helm template`); `getHostByName`
// returns an empty string. A template error is
// RenderFailed and keeps Helm's message, which names the template file and
// line ("template: podinfo/templates/x.yaml:12:3: executing ..."), prefixed
// with the chart. The output is deterministic when the templates are: charts
// that use random or time functions (randAlphaNum, genCA, now) render a new
// digest each time.
//
// Objects: NOTES.txt files and partials (_*.tpl) are dropped; the output is
// parsed exactly as `helm install` parses it: each rendered file is split
// into YAML documents by releaseutil.SplitManifests, each document is
// written as Helm writes it into the release manifest ("---", a "# Source"
// comment, the trimmed document and a newline, so a block scalar ending a
// document keeps one final newline) and read with the resource builder of
// kube.Build (k8s.io/cli-runtime, lists flattened: kind List, ConfigMapList
// and any object with items stand for their items). Empty documents and
// documents of comments are skipped; any other document must be a YAML
// mapping that is a Kubernetes object (InvalidObject, naming the template
// file and the document: a YAML sequence or plain text is refused, as by
// Helm). A document with a helm.sh/hook annotation is a hook, not an object:
// the hooks are found as releaseutil.SortManifests finds them (events of
// helm.sh/hook, comma-separated; an unknown event skips the hook, as in Helm;
// helm.sh/hook-weight, 0 when not an integer; helm.sh/hook-delete-policy),
// ordered as Helm runs them (kind, then weight and name) and returned in
// Result.Hooks, placed like the objects and counted against the same caps;
// hooks of no event cairn runs (test, test-success, rollbacks) are left out.
// Result.Digest covers them. The files in crds/ directories of the chart and its
// subcharts are objects too, read as they are, as helm install reads them
// (CRDs sort first). The objects are then namespaced, checked for
// duplicates, ordered and digested like those of a CUE module (see the
// package documentation), within Limits.MaxObjects and Limits.MaxBytes (of
// their JSON). Result.ModuleDigest is req.Digest;
// Result.Warnings notes a deprecated chart.
//
// Bounds: the whole render has the deadline Limits.Timeout (RenderTimeout).
// Templates cannot be interrupted, so each render runs in its own goroutine,
// which runs on past the deadline until it ends; at most max(4, GOMAXPROCS)
// such goroutines exist at once, and a render waits for one within its
// deadline. The limits bound the result, not the memory that templates use
// while they run: Renderer.RenderChart renders in a worker process, which
// has a memory budget and is killed at the deadline.
//
// Errors are *Error values whose message starts with "chart <req.Chart>: ".
func RenderChart(ctx context.Context, req ChartRequest) (*Result, error) {
	return renderChart(ctx, req, chartEnv{caps: defaultArchiveLimits, slots: chartSlots})
}

// renderChart is RenderChart in an environment.
func renderChart(ctx context.Context, req ChartRequest, env chartEnv) (*Result, error) {
	res, err := renderChartBounded(ctx, req, env)
	return res, chartError(req.Chart, err)
}

// renderChartBounded checks the archive's size, then renders in its own
// goroutine under a slot, and returns RenderTimeout when ctx ends first.
func renderChartBounded(ctx context.Context, req ChartRequest, env chartEnv) (*Result, error) {
	limits := req.Limits.withDefaults()
	if n := int64(len(req.Archive)); n > env.caps.archiveBytes {
		return nil, newError(ReasonLimitExceeded, "archive is %d bytes, more than the %d-byte cap", n, env.caps.archiveBytes)
	}
	return runBounded(ctx, limits, env.slots, "chart render", func() (*Result, error) {
		return renderChartSteps(req, limits, env.caps)
	})
}

// runBounded runs work, which cannot be interrupted, in its own goroutine under
// one of slots, within the deadline limits.Timeout: at the deadline it returns
// RenderTimeout and leaves the goroutine to end on its own (holding its slot, so
// that at most cap(slots) such goroutines exist); a panic is a RenderFailed error.
func runBounded(ctx context.Context, limits Limits, slots chan struct{}, what string, work func() (*Result, error)) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	if ctx.Err() != nil {
		return nil, timeoutError(ctx, limits, "before the render started")
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, timeoutError(ctx, limits, fmt.Sprintf("while waiting for a %s slot (earlier %ss are still running past their deadline)", what, what))
	}
	done := make(chan chartOutcome, 1)
	go func() {
		defer func() { <-slots }()
		defer func() {
			if p := recover(); p != nil {
				done <- chartOutcome{err: newError(ReasonRenderFailed, "%s panicked: %v", what, p)}
			}
		}()
		res, err := work()
		done <- chartOutcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		return nil, timeoutError(ctx, limits, "while running the "+what)
	}
}

// boundedSlots is the size of a pool of runBounded slots.
func boundedSlots() int { return max(4, runtime.GOMAXPROCS(0)) }

type chartOutcome struct {
	res *Result
	err error
}

// renderChartSteps does the work of a chart render, without its deadline.
func renderChartSteps(req ChartRequest, limits Limits, caps archiveLimits) (*Result, error) {
	// Chart: unpack within the caps, load, and refuse what Helm would not
	// install.
	chrt, err := loadChart(req.Archive, caps)
	if err != nil {
		return nil, err
	}
	helmCaps, err := req.Capabilities.helm()
	if err != nil {
		return nil, err
	}
	if err := checkInstallable(chrt, helmCaps); err != nil {
		return nil, err
	}
	// Schemas: no reach outside the chart before Helm compiles them.
	if err := checkSchemas(chrt); err != nil {
		return nil, err
	}
	// Values and templates.
	vals, err := chartValues(req.Values)
	if err != nil {
		return nil, err
	}
	var reads atomic.Int64
	rendered, err := renderTemplates(chrt, req, vals, helmCaps, &reads)
	if err != nil {
		return nil, err
	}
	// Objects: CRDs and rendered documents, without hooks, in render order;
	// then the hooks, in Helm's order, within the same caps.
	col, err := chartObjects(chrt, rendered, limits)
	if err != nil {
		return nil, err
	}
	hooks, err := chartHooks(rendered, col)
	if err != nil {
		return nil, err
	}
	res, err := assemble(col.objects, req.Namespace, req.Digest, chartWarnings(chrt))
	if err != nil {
		return nil, err
	}
	res.Lookups = reads.Load()
	if err := addHooks(res, hooks, req.Namespace); err != nil {
		return nil, err
	}
	return res, nil
}

// checkInstallable refuses what `helm install` refuses: library charts,
// dependencies missing from charts/ and a kubeVersion that excludes caps'.
func checkInstallable(c *chart.Chart, caps *chartutil.Capabilities) error {
	if c.Metadata.Type != "" && c.Metadata.Type != "application" {
		return newError(ReasonChartInvalid, "%s is a %s chart, which cannot be rendered", c.Name(), c.Metadata.Type)
	}
	if missing := MissingDependencies(c); len(missing) > 0 {
		return newError(ReasonChartInvalid, "dependencies %q of Chart.yaml are missing from charts/", missing)
	}
	return checkKubeVersion(c, caps)
}

// MissingDependencies returns the dependencies of c's Chart.yaml that its
// charts/ directory does not hold, in Chart.yaml order: the check of
// `helm package` and `helm install` (action.CheckDependencies), by name,
// whatever their condition or tags.
func MissingDependencies(c *chart.Chart) []string {
	var missing []string
	for _, dep := range c.Metadata.Dependencies {
		if !hasSubchart(c, dep.Name) {
			missing = append(missing, dep.Name)
		}
	}
	return missing
}

func hasSubchart(c *chart.Chart, name string) bool {
	for _, d := range c.Dependencies() {
		if d.Name() == name {
			return true
		}
	}
	return false
}

// chartValues parses the instance's values, a JSON object.
func chartValues(data []byte) (map[string]any, error) {
	if len(data) > maxValuesBytes {
		return nil, newError(ReasonLimitExceeded, "values are larger than %d bytes", maxValuesBytes)
	}
	vals := map[string]any{}
	if len(data) == 0 {
		return vals, nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, newError(ReasonValuesInvalid, "values are not valid JSON: %w", err)
	}
	switch v := v.(type) {
	case nil:
		return vals, nil
	case map[string]any:
		return v, nil
	}
	return nil, newError(ReasonValuesInvalid, "values must be a JSON object")
}

// renderTemplates processes the dependencies, coalesces and validates the
// values and renders the templates, as `helm install` does before it talks
// to the cluster.
func renderTemplates(c *chart.Chart, req ChartRequest, vals map[string]any, caps *chartutil.Capabilities, reads *atomic.Int64) (map[string]string, error) {
	if err := chartutil.ProcessDependenciesWithMerge(c, vals); err != nil {
		return nil, newError(ReasonChartInvalid, "failed to process the dependencies: %w", err)
	}
	opts := chartutil.ReleaseOptions{Name: req.Name, Namespace: req.Namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(c, vals, opts, caps)
	if err != nil {
		return nil, &Error{Reason: ReasonValuesInvalid, Err: trimmedError(err)}
	}
	// lookup reads through req.Lookup (else returns an empty object); DNS
	// lookups are off.
	rendered, err := renderWithLookup(c, top, req.Lookup, reads)
	if err != nil {
		return nil, &Error{Reason: ReasonRenderFailed, Err: trimmedError(err)}
	}
	return rendered, nil
}

func chartWarnings(c *chart.Chart) []string {
	if c.Metadata.Deprecated {
		return []string{fmt.Sprintf("chart %s %s is deprecated", c.Name(), c.Metadata.Version)}
	}
	return nil
}

// chartError prefixes the message of a render error with the chart.
func chartError(ref string, err error) error {
	var e *Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	out := *e
	out.Err = fmt.Errorf("chart %s: %w", ref, e.Err)
	return &out
}

// trimmedError drops the trailing newline of Helm's multi-line messages.
func trimmedError(err error) error {
	return errors.New(strings.TrimRight(err.Error(), "\n"))
}

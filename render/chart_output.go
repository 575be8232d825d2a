package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"
)

// notesFile is the suffix of the files Helm prints after an install instead
// of applying them.
const notesFile = "NOTES.txt"

// chartObjects turns the chart's CRD files and its rendered templates (in
// name order) into objects as `helm install` parses them, within the limits.
// Hooks are left out (see chartHooks); the collector is returned, so that the
// hooks count against the same caps.
func chartObjects(c *chart.Chart, rendered map[string]string, limits Limits) (*collector, error) {
	col := &collector{limits: limits}
	for _, crd := range c.CRDObjects() {
		if err := col.add(crd.Filename, string(crd.File.Data), false); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(rendered))
	for n := range rendered {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if strings.HasSuffix(n, notesFile) || strings.HasPrefix(path.Base(n), "_") {
			continue
		}
		if err := col.add(n, rendered[n], true); err != nil {
			return nil, err
		}
	}
	return col, nil
}

// collector gathers the objects of a chart render and enforces the caps, which
// the objects and the hooks share.
type collector struct {
	limits  Limits
	objects []rawObject
	count   int
	bytes   int64
}

// add parses a file of the chart as `helm install` does and adds its
// objects. A file of crds/ is parsed as it is (Helm installs CRDs from the
// file's data). A rendered template is split into documents by
// releaseutil.SplitManifests, which trims each one; each document must pass
// Helm's head check (releaseutil.SimpleHead), hooks are left out (chartHooks
// parses them), and the
// others are parsed the way renderResources writes them into the release
// manifest: "---\n# Source: FILE\n" + document + "\n". So a block scalar
// that ends a document keeps one final newline, whatever its chomping, as
// with Helm.
func (c *collector) add(file, content string, templates bool) error {
	if !templates {
		return c.addStream(file, []byte(content))
	}
	docs := releaseutil.SplitManifests(content)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for i, k := range keys {
		key := fmt.Sprintf("%s (document %d)", file, i+1)
		head, err := helmHead(key, docs[k])
		if err != nil {
			return err
		}
		if isHook(head) {
			continue
		}
		if err := c.addStream(key, helmManifest(file, docs[k])); err != nil {
			return err
		}
	}
	return nil
}

// helmHead parses a document's head as Helm's releaseutil.SortManifests
// does, which refuses anything but a YAML mapping (or an empty document).
func helmHead(key, doc string) (releaseutil.SimpleHead, error) {
	var head releaseutil.SimpleHead
	err := yaml.Unmarshal([]byte(doc), &head)
	switch {
	case err == nil && head.Kind == "" && head != (releaseutil.SimpleHead{}):
		return head, newError(ReasonInvalidObject, "object %s has no kind", key)
	case err == nil:
		return head, nil
	}
	if _, err := yaml.YAMLToJSON([]byte(doc)); err != nil {
		return head, newError(ReasonInvalidObject, "%s is not valid YAML: %v", key, err)
	}
	return head, newError(ReasonInvalidObject, "%s is not a Kubernetes object (a YAML mapping): %v", key, err)
}

// helmManifest is a document as Helm's renderResources writes it into the
// manifest that install and upgrade parse.
func helmManifest(file, doc string) []byte {
	return []byte("---\n# Source: " + file + "\n" + doc + "\n")
}

// addStream parses a stream of YAML documents (see parse) and adds each object.
func (c *collector) addStream(key string, data []byte) error {
	objs, err := c.parse(key, data)
	c.objects = append(c.objects, objs...)
	return err
}

// parse parses a stream of YAML documents as kube.Build does in
// `helm install` (the resource builder of k8s.io/cli-runtime, with lists
// flattened), without a cluster, and returns its objects, counted against the
// caps. Empty documents are skipped; an object with items (kind: List,
// ConfigMapList, ...) stands for its items.
func (c *collector) parse(key string, data []byte) ([]rawObject, error) {
	infos, err := resource.NewLocalBuilder().Unstructured().ContinueOnError().
		Stream(bytes.NewReader(data), key).Flatten().Do().Infos()
	if err != nil {
		return nil, newError(ReasonInvalidObject, "%s is not a Kubernetes object: %s", key, withoutData(err))
	}
	var out []rawObject
	for j, info := range infos {
		k := key
		if len(infos) > 1 {
			k = fmt.Sprintf("%s, object %d", key, j+1)
		}
		obj, err := json.Marshal(info.Object)
		if err != nil {
			return out, newError(ReasonInvalidObject, "failed to encode %s: %v", k, err)
		}
		o := rawObject{key: k, data: obj}
		if err := c.within(o); err != nil {
			return out, err
		}
		out = append(out, o)
	}
	return out, nil
}

// append adds o, counted against the caps.
func (c *collector) append(o rawObject) error {
	if err := c.within(o); err != nil {
		return err
	}
	c.objects = append(c.objects, o)
	return nil
}

// within counts o against the caps.
func (c *collector) within(o rawObject) error {
	if c.count++; c.count > c.limits.MaxObjects {
		return newError(ReasonLimitExceeded, "chart renders more than MaxObjects (%d) objects", c.limits.MaxObjects)
	}
	if c.bytes += int64(len(o.data)); c.bytes > c.limits.MaxBytes {
		return newError(ReasonLimitExceeded, "rendered objects exceed MaxBytes (%d bytes) at %s", c.limits.MaxBytes, o.key)
	}
	return nil
}

// isHook tells whether a document's head carries the helm.sh/hook
// annotation, with any value: Helm runs such objects as hooks or skips them
// (unknown hook types), and never installs them with the release's objects.
func isHook(head releaseutil.SimpleHead) bool {
	if head.Metadata == nil {
		return false
	}
	_, ok := head.Metadata.Annotations[release.HookAnnotation]
	return ok
}

// quotedData is the document that the resource builder quotes when a kind or
// an apiVersion is missing.
var quotedData = regexp.MustCompile(`is missing in '(?s:.*)'`)

// withoutData is the message of a resource builder error without the
// documents it quotes, which may hold a Secret's data.
func withoutData(err error) string {
	msg := quotedData.ReplaceAllString(err.Error(), "is missing")
	if strings.Contains(msg, "is not a list") {
		msg = "a list holds a list, which helm install refuses (" + msg + ")"
	}
	return msg
}

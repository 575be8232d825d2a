package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// notesFile is the suffix of the files Helm prints after an install instead
// of applying them.
const notesFile = "NOTES.txt"

// chartObjects turns the chart's CRD files and its rendered templates (in
// name order) into objects, within the limits. Hooks are dropped.
func chartObjects(c *chart.Chart, rendered map[string]string, limits Limits) ([]rawObject, error) {
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
	return col.objects, nil
}

// collector gathers the objects of a chart render and enforces the caps.
type collector struct {
	limits  Limits
	objects []rawObject
	bytes   int64
}

// add splits a file into YAML documents as Helm does and adds each object.
// Hooks are dropped from templates (not from crds/, which Helm does not
// template).
func (c *collector) add(file, content string, templates bool) error {
	docs := releaseutil.SplitManifests(content)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for i, k := range keys {
		key := fmt.Sprintf("%s (document %d)", file, i+1)
		data, err := yaml.YAMLToJSON([]byte(docs[k]))
		if err != nil {
			return newError(ReasonInvalidObject, "%s is not valid YAML: %v", key, err)
		}
		data = bytes.TrimSpace(data)
		if string(data) == "null" {
			continue // empty or only comments
		}
		if len(data) == 0 || data[0] != '{' {
			return newError(ReasonInvalidObject, "%s is not a Kubernetes object", key)
		}
		if templates && isHook(data) {
			continue
		}
		if err := c.append(rawObject{key: key, data: data}); err != nil {
			return err
		}
	}
	return nil
}

func (c *collector) append(o rawObject) error {
	if len(c.objects) >= c.limits.MaxObjects {
		return newError(ReasonLimitExceeded, "chart renders more than MaxObjects (%d) objects", c.limits.MaxObjects)
	}
	if c.bytes += int64(len(o.data)); c.bytes > c.limits.MaxBytes {
		return newError(ReasonLimitExceeded, "rendered objects exceed MaxBytes (%d bytes) at %s", c.limits.MaxBytes, o.key)
	}
	c.objects = append(c.objects, o)
	return nil
}

// isHook tells whether an object carries the helm.sh/hook annotation, with
// any value: Helm runs such objects as hooks or skips them (unknown hook
// types), and never installs them as part of the release.
func isHook(data []byte) bool {
	var head struct {
		Metadata struct {
			Annotations map[string]any `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	_, ok := head.Metadata.Annotations[release.HookAnnotation]
	return ok
}

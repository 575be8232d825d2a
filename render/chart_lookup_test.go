package render

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// passwordChart keeps the password of its Secret with `lookup`, as charts in the
// wild do, and counts the ConfigMaps of its namespace (testdata/charts/kept).
func passwordChart(t *testing.T) []byte {
	t.Helper()
	return chartArchive(t, "kept", chartFiles(t, "kept"))
}

// fakeCluster is a Lookup over a few objects, recording the reads.
type fakeCluster struct {
	reads []string
	err   error
}

func (c *fakeCluster) lookup(apiVersion, kind, namespace, name string) (map[string]any, error) {
	c.reads = append(c.reads, apiVersion+"/"+kind+" "+namespace+"/"+name)
	switch {
	case c.err != nil:
		return nil, c.err
	case kind == "Secret" && name == "web-db":
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"password": "a2VwdA=="}}, nil
	case kind == "ConfigMap" && name == "":
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMapList", "items": []any{
			map[string]any{"metadata": map[string]any{"name": "a"}}, map[string]any{"metadata": map[string]any{"name": "b"}}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
}

// TestRenderChartLookup: `lookup` reads the cluster through the request's Lookup,
// in-process and in a worker process alike: an object, a list, an object that does
// not exist (an empty map, as in Helm); each read is counted in Result.Lookups.
// Without a Lookup it returns an empty map and reads nothing, as `helm template`.
// A failed read fails the render, naming the read.
func TestRenderChartLookup(t *testing.T) {
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	renders := map[string]func(context.Context, ChartRequest) (*Result, error){"in process": RenderChart, "in a worker": r.RenderChart}
	for where, renderChart := range renders {
		t.Run(where, func(t *testing.T) {
			g := NewWithT(t)
			cluster := &fakeCluster{}
			req := chartRequest(passwordChart(t), "")
			req.Lookup = cluster.lookup
			res, err := renderChart(context.Background(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nested(res, "Secret", "web-db", "data", "password")).To(Equal("a2VwdA=="), "kept")
			g.Expect(nested(res, "ConfigMap", "web-greeting", "data", "configMaps")).To(Equal("2"))
			g.Expect(res.Lookups).To(Equal(int64(2)))
			g.Expect(cluster.reads).To(ConsistOf("v1/Secret team-a/web-db", "v1/ConfigMap team-a/"))

			req.Name = "other" // its Secret does not exist
			res, err = renderChart(context.Background(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nested(res, "Secret", "other-db", "data", "password")).To(And(HaveLen(32), Not(Equal("a2VwdA=="))), "generated")

			req.Lookup = nil
			res, err = renderChart(context.Background(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Lookups).To(BeZero())
			g.Expect(nested(res, "ConfigMap", "other-greeting", "data", "configMaps")).To(Equal("0"))

			req.Lookup = (&fakeCluster{err: errors.New(`secrets "web-db" is forbidden`)}).lookup
			_, err = renderChart(context.Background(), req)
			g.Expect(Reason(err)).To(Equal(ReasonRenderFailed), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(`lookup v1 Secret in team-a other-db: secrets "web-db" is forbidden`))
		})
	}
}

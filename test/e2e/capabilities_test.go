package e2e

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/sign"
)

// monitoredChart packages examples/charts/monitored, which renders a ServiceMonitor
// only where the cluster serves monitoring.coreos.com/v1 ServiceMonitor, under name,
// with kubeVersion as its Chart.yaml constraint when set.
func monitoredChart(t *testing.T, name, kubeVersion string) []byte {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("..", "..", "examples", "charts", "monitored"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Name = name
	if kubeVersion != "" {
		ch.Metadata.KubeVersion = kubeVersion
	}
	data, err := sign.PackageChart(ch)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serviceMonitorCRD is a minimal CRD of monitoring.coreos.com/v1 ServiceMonitor.
func (e *env) serviceMonitorCRD() *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	e.g.Expect(yamlToObject([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`), u)).To(Succeed())
	return u
}

// removeServiceMonitorCRD deletes the CRD (the cluster is shared by the tests) and
// waits until it is no longer served.
func (e *env) removeServiceMonitorCRD() {
	e.t.Helper()
	err := e.c.Delete(e.ctx, e.serviceMonitorCRD())
	e.g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	e.g.Eventually(func() bool {
		return e.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "servicemonitors.monitoring.coreos.com") == nil
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
}

// installServiceMonitorCRD creates the CRD and waits until discovery serves it.
func (e *env) installServiceMonitorCRD(dc discovery.DiscoveryInterface) {
	e.t.Helper()
	e.g.Expect(e.c.Create(e.ctx, e.serviceMonitorCRD())).To(Succeed())
	e.g.Eventually(func() error {
		_, err := dc.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		return err
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestChartsSeeTheClusterCapabilities: charts render against the cluster's own
// capabilities, as with `helm install`. Without the ServiceMonitor CRD a chart renders
// no ServiceMonitor; a chart whose kubeVersion excludes the cluster's version fails
// with a message naming the chart, the constraint and the version, while the other
// instance syncs. Once the CRD is served, a drift check leaves the chart instance for
// a sync (status.capabilitiesDigest differs from the cluster's), the plan shows the
// ServiceMonitor to create, and the next sync at the same commit renders and applies
// it; the sync after that renders nothing again.
func TestChartsSeeTheClusterCapabilities(t *testing.T) {
	e := newEnv(t)
	e.removeServiceMonitorCRD()
	t.Cleanup(e.removeServiceMonitorCRD)
	dc, err := discovery.NewDiscoveryClientForConfig(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	info, err := dc.ServerVersion()
	e.g.Expect(err).NotTo(HaveOccurred())

	reg := startRegistry(t, false, false)
	rc := registryClient(t, reg, false)
	pushChart(t, e.ctx, rc, "charts/monitored", monitoredChart(t, "monitored", ""), nil)
	pushChart(t, e.ctx, rc, "charts/future", monitoredChart(t, "future", ">=99.0.0"), nil)
	url := "oci://" + reg.Host + "/charts/"
	files := map[string]string{
		"platform.yaml":         platformWithVerify("", ""),
		"registries.yaml":       registryYAML("charts", reg.Host, true, ""),
		"instances/web.yaml":    chartInstanceYAML("web", e.ns, url+"monitored", "0.1.0", ""),
		"instances/future.yaml": chartInstanceYAML("future", e.ns, url+"future", "0.1.0", ""),
	}
	repo := newGitRepo(t, files)

	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "web-cluster").Data).To(HaveKeyWithValue("kubeVersion", info.GitVersion))
	e.g.Expect(inventoryIDs(e.inventoryEntries(e.ns, "web"))).NotTo(ContainElement(ContainSubstring("ServiceMonitor")))
	before := e.instanceCR(e.ns, "web").Status.CapabilitiesDigest
	e.g.Expect(before).To(HavePrefix("sha256:"))
	future := result(res, e.ns, "future")
	e.g.Expect(future.Action).To(BeEquivalentTo("Failed"), "%+v", future)
	e.g.Expect(future.Reason).To(Equal("ChartInvalid"))
	e.g.Expect(future.Retry).To(Equal(outcome.Stalled))
	e.g.Expect(future.Message).To(ContainSubstring(url + "future@sha256:"))
	e.g.Expect(future.Message).To(ContainSubstring("chart future 0.1.0 requires kubeVersion >=99.0.0, which excludes Kubernetes " + info.GitVersion))
	e.g.Expect(e.instanceCR(e.ns, "future").Status.Inventory).To(BeNil(), "nothing applied")

	e.installServiceMonitorCRD(dc)
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(reports).To(ContainElement(And(HaveField("Name", "web"), HaveField("Resync", true), HaveField("Drifted", BeEmpty()))))
	e.g.Expect(e.get("monitoring.coreos.com/v1", "ServiceMonitor", e.ns, "web")).To(BeNil(), "a drift check applies nothing of a render its inventory does not hold")

	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	planned := instancePlan(plan, "web")
	e.g.Expect(planned.Why).To(ContainSubstring("the cluster's capabilities changed"))
	e.g.Expect(planned.Create).To(ContainElement(ContainSubstring("ServiceMonitor")))

	res = e.sync(repo) // the same commit
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	sm := e.get("monitoring.coreos.com/v1", "ServiceMonitor", e.ns, "web")
	e.g.Expect(sm).NotTo(BeNil(), "the chart renders the ServiceMonitor once its CRD is served")
	e.g.Expect(sm.GetLabels()).To(HaveKeyWithValue(cairnv1.ManagedByLabel, cairnv1.ManagedByValue))
	e.g.Expect(inventoryIDs(e.inventoryEntries(e.ns, "web"))).To(ContainElement(ContainSubstring("ServiceMonitor")))
	after := e.instanceCR(e.ns, "web").Status.CapabilitiesDigest
	e.g.Expect(after).To(HavePrefix("sha256:"))
	e.g.Expect(after).NotTo(Equal(before))
	e.g.Expect(e.progress.String()).To(ContainSubstring("the cluster's capabilities changed"))

	res = e.sync(repo)
	web := result(res, e.ns, "web")
	e.g.Expect(web.Action).To(BeEquivalentTo("Unchanged"), "%+v", web)
	e.g.Expect(web.Message).To(Equal("unchanged"), "not rendered again: the capabilities are those it saw")
	e.logEverything()
}

func inventoryIDs(entries []cairnv1.InventoryEntry) []string {
	ids := make([]string, len(entries))
	for i, en := range entries {
		ids[i] = en.ID
	}
	return ids
}

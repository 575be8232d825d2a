package harness_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"cairn.dev/cairn/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.DefaultOptions())
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return client
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	client := clientFor(t, c.RESTConfig)
	ns := c.Namespace(t)
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
			},
		},
	}
	begin := time.Now()
	_, err := client.AppsV1().Deployments(ns).Create(context.Background(), deploy, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func(g Gomega) {
		got, err := client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.AvailableReplicas).To(Equal(int32(2)))
		g.Expect(got.Status.Conditions).To(ContainElement(And(
			HaveField("Type", appsv1.DeploymentAvailable), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("Deployment Available in %s", time.Since(begin).Round(time.Millisecond))

	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(2))
	for _, pod := range pods.Items {
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), pod.Name)
		g.Expect(pod.Spec.NodeName).To(Equal(harness.NodeName), pod.Name)
	}
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	client := clientFor(t, c.RESTConfig)
	ns, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "doomed-"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content", Namespace: ns.Name}}
	_, err = client.CoreV1().ConfigMaps(ns.Name).Create(context.Background(), cm, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	begin := time.Now()
	g.Expect(client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() bool {
		_, err := client.CoreV1().Namespaces().Get(context.Background(), ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
	t.Logf("namespace deleted in %s", time.Since(begin).Round(time.Millisecond))
}

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	client := clientFor(t, c.RESTConfig)
	ns := c.Namespace(t)
	owner, err := client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	_, err = client.CoreV1().ConfigMaps(ns).Create(context.Background(), dependent, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(client.CoreV1().ConfigMaps(ns).Delete(context.Background(), "owner", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() bool {
		_, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
}

func TestRBACIsEnforced(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	ns := c.Namespace(t)
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":default"}
	client := clientFor(t, cfg)

	_, err := client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
}

func TestRegistryAcceptsPushOverPlainHTTP(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	g.Expect(c.RegistryHost).NotTo(BeEmpty())
	base := "http://" + c.RegistryHost

	resp, err := http.Get(base + "/v2/")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

	repo := fmt.Sprintf("harness/test-%d", time.Now().UnixNano())
	config := []byte("{}")
	configDigest := pushBlob(g, base, repo, config)
	manifest := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":%q,"size":%d},"layers":[]}`,
		configDigest, len(config)))
	req, err := http.NewRequest(http.MethodPut, base+"/v2/"+repo+"/manifests/v1", bytes.NewReader(manifest))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))

	req, err = http.NewRequest(http.MethodGet, base+"/v2/"+repo+"/manifests/v1", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Docker-Content-Digest")).To(Equal(digest(manifest)))
}

// pushBlob uploads data in one monolithic PUT and returns its digest.
func pushBlob(g *WithT, base, repo string, data []byte) string {
	resp, err := http.Post(base+"/v2/"+repo+"/blobs/uploads/", "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	location, err := resp.Location()
	g.Expect(err).NotTo(HaveOccurred())
	query := location.Query()
	query.Set("digest", digest(data))
	location.RawQuery = query.Encode()
	req, err := http.NewRequest(http.MethodPut, location.String(), bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	return digest(data)
}

func digest(data []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

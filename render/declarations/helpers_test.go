package declarations

import (
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

// platformYAML is a valid Platform; the line numbers of its fields are used by tests.
const platformYAML = `apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  catalogs:
    - module: example.com/catalog@v0
      version: v0.3.1
  skewPolicy: Warn
  moduleRegistry: internal
  namespaces:
    allow: ["team-*", "infra"]
    deny: ["kube-*"]
  verify:
    mode: Enforce
  prune:
    maxDeletions: 500
    maxPercent: 50
    protectedKinds: [Namespace, CustomResourceDefinition]
  render:
    mode: InProcess
    publish: {registry: internal, repository: rendered/cluster}
`

const registryYAML = `apiVersion: cairn.dev/v1alpha1
kind: Registry
metadata:
  name: internal
spec:
  hostname: registry.example.com:5000
  caConfigMap: registry-ca
  secretRef: {name: internal-creds}
  verify:
    cosign:
      publicKeys: [{secretRef: {name: cosign-pub, key: cosign.pub}}]
  signing:
    keySecretRef: {name: cosign-key}
`

const certManagerYAML = `apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: cert-manager
  namespace: infra
spec:
  module:
    chart: {url: oci://registry.example.com/charts/cert-manager, version: 1.15.0}
  values: {installCRDs: true}
`

const podinfoYAML = `apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: podinfo
  namespace: team-a
  labels: {app.kubernetes.io/part-of: demo}
spec:
  module:
    cue: {path: example.com/modules/podinfo@v0, version: v0.4.0}
  values:
    replicas: 2
    ingress: {host: podinfo.example.com}
  serviceAccountName: deployer
  dependsOn: [{name: cert-manager, namespace: infra}]
  prune: true
  wait: true
  timeout: 5m
  drift: Correct
  secrets:
    - {name: db-credentials, once: true, data: {password: {random: {length: 32}}}}
    - {name: webhook-tls, tls: {commonName: webhook.team-a.svc, validFor: 2160h}, rotateAfter: 1440h}
`

const frontendYAML = `apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: frontend
  namespace: team-a
spec:
  module:
    local: {path: ./modules/frontend}
  dependsOn: [{name: podinfo}]
`

// deploymentYAML is a Kubernetes manifest living in the repository: it is ignored.
const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: unrelated, namespace: default, uid: ignored}
status: {replicas: 1}
`

// realistic returns a valid repository: a Platform, a Registry and three instances in a
// dependsOn chain, plus files the loader must ignore.
func realistic() fstest.MapFS {
	return fstest.MapFS{
		"platform.yaml":              {Data: []byte(platformYAML + "---\n" + registryYAML)},
		"instances/infra/cert.yml":   {Data: []byte(certManagerYAML)},
		"instances/team-a/apps.yaml": {Data: []byte(podinfoYAML + "---\n" + frontendYAML + "---\n")},
		"modules/frontend/main.cue":  {Data: []byte("package frontend\n")},
		"manifests/deploy.yaml":      {Data: []byte(deploymentYAML)},
		"README.md":                  {Data: []byte("# platform\n")},
		".git/config.yaml":           {Data: []byte("not: [valid")},
	}
}

// with returns the realistic repository with files replaced, added or (empty) removed.
func with(files map[string]string) fstest.MapFS {
	fsys := realistic()
	for name, data := range files {
		if data == "" {
			delete(fsys, name)
			continue
		}
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

// instanceDoc returns a ModuleInstance document whose spec lines start at line 7.
func instanceDoc(namespace, name string, spec ...string) string {
	return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n" +
		"  name: " + name + "\n  namespace: " + namespace + "\nspec:\n" + strings.Join(spec, "\n") + "\n"
}

// withPlatform returns the realistic repository with Platform lines replaced.
func withPlatform(old, replacement string) fstest.MapFS {
	return with(map[string]string{"platform.yaml": strings.Replace(platformYAML, old, replacement, 1) + "---\n" + registryYAML})
}

func names(set *Set) []string {
	var out []string
	for _, mi := range set.Instances {
		out = append(out, mi.Namespace+"/"+mi.Name)
	}
	return out
}

// errorFor returns the problems reported for a file.
func errorsIn(set *Set, file string) []*Error {
	var out []*Error
	for _, e := range set.Invalid {
		if e.File == file {
			out = append(out, e)
		}
	}
	return out
}

// mustLoad loads fsys and expects no fatal error.
func mustLoad(t *testing.T, fsys fstest.MapFS) *Set {
	t.Helper()
	set, err := Load(fsys, Options{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return set
}

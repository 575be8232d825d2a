package e2e

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func ssaDefaults() ssa.ApplyOptions { return ssa.DefaultApplyOptions() }

func yamlToObject(b []byte, u *unstructured.Unstructured) error {
	return yaml.Unmarshal(b, &u.Object)
}

// appModule is a small local module: a Deployment and one ConfigMap per entry of
// values.configs.
const appModule = `package app

#config: {
	replicas: *1 | int & >=0
	image:    *"ghcr.io/stefanprodan/podinfo:6.7.0" | string
	configs: [string]: string
	enabled:    *true | bool
	badService: *false | bool
	namespaces: [...string]
}
instance: {name: string, namespace: string}
values: #config
objects: {
	if values.badService {
		badService: {
			apiVersion: "v1"
			kind:       "Service"
			metadata: name: "\(instance.name)-bad"
			spec: ports: [{port: 99999}]
		}
	}
	for n in values.namespaces {
		"ns-\(n)": {apiVersion: "v1", kind: "Namespace", metadata: name: n}
	}
	if values.enabled {deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: values.replicas
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: containers: [{name: "app", image: values.image}]
			}
		}
	}}
	for k, v in values.configs {
		"cm-\(k)": {
			apiVersion: "v1"
			kind:       "ConfigMap"
			metadata: name: "\(instance.name)-\(k)"
			data: value: v
		}
	}
}
`

const appModuleFile = `module: "cairn.dev/test/app@v0"
language: version: "v0.17.0"
`

// platformYAML is a Platform allowing every namespace but kube-* (to instances and
// their objects), and Namespaces and CRDs from instances applying as cairn, with the
// given prune block.
func platformYAML(prune string) string {
	return `apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  namespaces:
    allow: ["*"]
    deny: ["kube-*"]
  clusterResources:
    - {group: "", kind: Namespace}
    - {group: apiextensions.k8s.io, kind: CustomResourceDefinition}
` + prune
}

// instanceYAML declares an instance of the app module.
type inst struct {
	name, ns  string
	replicas  int
	configs   map[string]string
	dependsOn []string
	extra     string // appended under spec
}

func (i inst) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n", i.name, i.ns)
	b.WriteString("  module:\n    local:\n      path: ./modules/app\n  timeout: 1m\n")
	fmt.Fprintf(&b, "  values:\n    replicas: %d\n    configs:\n", i.replicas)
	if len(i.configs) == 0 {
		b.WriteString("      {}\n")
	}
	keys := make([]string, 0, len(i.configs))
	for k := range i.configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s: %q\n", k, i.configs[k])
	}
	if len(i.dependsOn) > 0 {
		b.WriteString("  dependsOn:\n")
		for _, d := range i.dependsOn {
			fmt.Fprintf(&b, "    - name: %s\n", d)
		}
	}
	b.WriteString(i.extra)
	return b.String()
}

// appRepo returns the files of a repository with the app module, a Platform and the
// instances, one file each under instances/.
func appRepo(prune string, instances ...inst) map[string]string {
	files := map[string]string{
		"platform.yaml":                  platformYAML(prune),
		"modules/app/app.cue":            appModule,
		"modules/app/cue.mod/module.cue": appModuleFile,
		"README.md":                      "not a declaration\n",
	}
	for _, i := range instances {
		files["instances/"+i.name+".yaml"] = i.yaml()
	}
	return files
}

func configs(keys ...string) map[string]string {
	m := map[string]string{}
	for _, k := range keys {
		m[k] = "v-" + k
	}
	return m
}

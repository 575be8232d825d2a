package declarations_test

import (
	"fmt"
	"testing/fstest"

	"cairn.dev/cairn/render/declarations"
)

func ExampleLoad() {
	fsys := fstest.MapFS{
		"platform.yaml": {Data: []byte(`apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata: {name: cluster}
spec:
  namespaces: {allow: ["team-*"]}
`)},
		"instances.yaml": {Data: []byte(`apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata: {name: frontend, namespace: team-a}
spec:
  module: {local: {path: ./modules/frontend}}
  dependsOn: [{name: backend}]
---
apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata: {name: backend, namespace: team-a}
spec:
  module: {chart: {url: oci://registry.example.com/charts/backend, version: 1.2.0}}
---
apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata: {name: stray, namespace: default}
spec:
  module: {local: {path: ./modules/stray}}
  valuez: {}
`)},
	}
	set, err := declarations.Load(fsys, declarations.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mi := range set.Instances {
		fmt.Println(mi.Namespace + "/" + mi.Name)
	}
	for _, e := range set.Invalid {
		fmt.Println(e.Reason, e)
	}
	// Output:
	// team-a/backend
	// team-a/frontend
	// NamespaceDenied instances.yaml:16: ModuleInstance default/stray: metadata.namespace: namespace "default" matches none of the Platform's allowed patterns ["team-*"]
	// InvalidDeclaration instances.yaml:19: ModuleInstance default/stray: spec.valuez: unknown field
}

package render_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"cairn.dev/cairn/render"
)

func ExampleRenderer_Render_timoni() {
	// A minimal Timoni module: its values' defaults in values.cue, the tags in
	// timoni.cue, the objects in timoni.apply.
	repo := fstest.MapFS{
		"hello/cue.mod/module.cue": {Data: []byte("module: \"example.com/hello\"\nlanguage: version: \"v0.9.0\"\n")},
		"hello/values.cue":         {Data: []byte("package main\n\nvalues: {replicas: 1, message: \"hello\"}\n")},
		"hello/timoni.cue": {Data: []byte(`package main

values: {replicas: int, message: string}
timoni: {
	apiVersion: "v1alpha1"
	instance: {
		name:      string @tag(name)
		namespace: string @tag(namespace)
		version:   string @tag(mv, var=moduleVersion)
		kube:      string @tag(kv, var=kubeVersion)
	}
	apply: app: [{
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		metadata: labels: version: instance.version
		spec: replicas: values.replicas
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: instance.name
		data: {message: values.message, kube: instance.kube}
	}]
}
`)},
	}
	r := render.NewRenderer()
	defer r.Close()
	res, err := r.Render(context.Background(), render.Request{
		Name: "hello", Namespace: "team-a", Source: repo,
		Timoni: &render.TimoniModule{Path: "./hello", KubeVersion: "v1.36.2"},
		Values: []byte(`{"replicas": 3}`), // merged over values.cue's replicas: 1
	})
	if err != nil {
		fmt.Println(render.Reason(err), err)
		return
	}
	for _, o := range res.Objects {
		fmt.Printf("%s %s/%s labels=%v data=%v spec=%v\n", o.GetKind(), o.GetNamespace(), o.GetName(), o.GetLabels(),
			o.Object["data"], o.Object["spec"])
	}
	// Output:
	// ConfigMap team-a/hello labels=map[] data=map[kube:1.36.2 message:hello] spec=<nil>
	// Deployment team-a/hello labels=map[version:0.0.0-devel] data=<nil> spec=map[replicas:3]
}

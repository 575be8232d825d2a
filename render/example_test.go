package render_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"cairn.dev/cairn/render"
)

func ExampleRenderer_Render() {
	repo := fstest.MapFS{
		"modules/hello/main.cue": {Data: []byte(`package hello

#config: {
	replicas: *1 | int & >=0
	message:  *"hello" | string
}
instance: {name: string, namespace: string}
values:   #config
objects: {
	config: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: instance.name
		data: message: values.message
	}
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: replicas: values.replicas
	}
}
`)},
	}
	r := render.NewRenderer()
	defer r.Close()
	res, err := r.Render(context.Background(), render.Request{
		Name:      "hello",
		Namespace: "team-a",
		Source:    repo,
		LocalPath: "./modules/hello",
		Values:    []byte(`{"replicas": 2}`),
	})
	if err != nil {
		fmt.Println(render.Reason(err), err)
		return
	}
	for _, o := range res.Objects {
		fmt.Printf("%s %s/%s\n", o.GetKind(), o.GetNamespace(), o.GetName())
	}

	_, err = r.Render(context.Background(), render.Request{
		Name: "hello", Namespace: "team-a", Source: repo, LocalPath: "modules/hello",
		Values: []byte(`{"replica": 2}`),
	})
	fmt.Println(render.Reason(err), err)
	// Output:
	// ConfigMap team-a/hello
	// Deployment team-a/hello
	// RenderFailed values.json:1:3: values.replica: field not allowed
}

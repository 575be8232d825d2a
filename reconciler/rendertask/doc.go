// Package rendertask renders one instance's input away from the controller
// (Platform.spec.render.mode: Job, docs/render-jobs.md): the controller packs
// what the render reads from Git into a content-addressed source artifact
// (PackSource) and writes the render request, with no credential, as a Spec;
// `cairn render-task` pulls the source, renders it with the same code and
// limits as an in-process render, seals the data of every rendered Secret to
// the controller's key for that task, and pushes the whole render as a result
// artifact (Run); the controller pulls it by digest, checks that it names the
// input it asked for, and opens it (Fetch). What follows the render (placement,
// the keyed digest, publication and its signature, apply) stays with the
// controller.
package rendertask

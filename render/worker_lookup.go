package render

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// askLookup is the Lookup of a chart rendered in the worker: it asks the parent,
// which reads the cluster.
func (s *workerServer) askLookup(apiVersion, kind, namespace, name string) (map[string]any, error) {
	call := lookupCall{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}
	if err := s.out.Encode(workerMessage{Lookup: &call}); err != nil {
		return nil, err
	}
	var msg workerMessage
	if err := s.in.Decode(&msg); err != nil {
		return nil, err
	}
	switch {
	case msg.Error != nil:
		return nil, msg.Error.toError()
	case msg.LookupNotFound:
		return nil, notFound(call)
	case msg.LookupResult == nil:
		return map[string]any{}, nil
	}
	return msg.LookupResult, nil
}

// chartHandler answers the questions of a worker rendering a chart: its lookups.
type chartHandler struct {
	lookup Lookup
}

func (h chartHandler) module() (*workerModule, error) {
	return nil, newError(ReasonRenderFailed, "a chart render has no CUE module")
}

func (h chartHandler) modFile(string) ([]byte, error) {
	return nil, newError(ReasonRenderFailed, "a chart render has no CUE module")
}

// lookupCall reads the cluster for the chart, or refuses when the render has no
// Lookup.
func (h chartHandler) lookupCall(call lookupCall) workerMessage {
	if h.lookup == nil {
		return workerMessage{Error: toWorkerError(newError(ReasonRenderFailed, "lookup %s: this render reads no cluster", call))}
	}
	return lookupReply(h.lookup(call.APIVersion, call.Kind, call.Namespace, call.Name))
}

func lookupReply(obj map[string]any, err error) workerMessage {
	switch {
	case apierrors.IsNotFound(err):
		return workerMessage{LookupNotFound: true}
	case err != nil:
		return workerMessage{Error: toWorkerError(err)}
	}
	return workerMessage{LookupResult: obj}
}

// lookupCall refuses: a CUE module has no lookup.
func (h *moduleHandler) lookupCall(call lookupCall) workerMessage {
	return workerMessage{Error: toWorkerError(newError(ReasonRenderFailed, "lookup %s: CUE modules read no cluster", call))}
}

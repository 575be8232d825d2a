package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"
)

// The render worker protocol: newline-delimited JSON messages (one
// workerMessage each) over the worker's stdin (from the parent) and stdout
// (to the parent).
//
//	worker: {"ready":true}                          once, when it starts
//	parent: {"render":{...}}                        a render: the prepared module's key and the input
//	worker: {"need":true}                           the module is not prepared in this worker
//	parent: {"module":{...}} or {"abort":true}      the module's files, or the render ends
//	worker: {"modFile":"m@v"}                       the loader needs an unlisted module file (any number)
//	parent: {"modFileData":"..."} or {"error":{..}} its contents, or why not
//	worker: {"result":{...}} or {"error":{...}}     the end of the render
//
//	parent: {"chart":{...},"chartLookup":true}      a chart render (ChartRequest); chartLookup: the parent serves lookups
//	worker: {"lookup":{...}}                        the chart's `lookup` reads the cluster (any number)
//	parent: {"lookupResult":{...}}, {"lookupNotFound":true} or {"error":{...}}
//	worker: {"chartResult":{...}} or {"error":{...}}
//
//	parent: {"kustomize":{...}}                     a kustomize build: the directory and the files it reads
//	worker: {"result":{...}} or {"error":{...}}
//
// A worker serves one render at a time and outlives it.
type workerMessage struct {
	Ready          bool           `json:"ready,omitempty"`
	Render         *workerJob     `json:"render,omitempty"`
	Need           bool           `json:"need,omitempty"`
	Module         *workerModule  `json:"module,omitempty"`
	Abort          bool           `json:"abort,omitempty"`
	ModFile        string         `json:"modFile,omitempty"`
	ModFileData    []byte         `json:"modFileData,omitempty"`
	Result         *workerResult  `json:"result,omitempty"`
	Chart          *ChartRequest  `json:"chart,omitempty"`
	ChartLookup    bool           `json:"chartLookup,omitempty"`
	ChartResult    *chartResult   `json:"chartResult,omitempty"`
	Kustomize      *kustomizeJob  `json:"kustomize,omitempty"`
	Lookup         *lookupCall    `json:"lookup,omitempty"`
	LookupResult   map[string]any `json:"lookupResult,omitempty"`
	LookupNotFound bool           `json:"lookupNotFound,omitempty"`
	Error          *workerError   `json:"error,omitempty"`
}

// workerJob is one render: what a prepared module needs to evaluate.
type workerJob struct {
	Key       string `json:"key"` // preparedKey.id()
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Values    []byte `json:"values,omitempty"`
	Limits    Limits `json:"limits"`
	// MaxPrepared and MaxPreparedBytes bound the modules the worker keeps
	// prepared (RendererOptions).
	MaxPrepared      int   `json:"maxPrepared"`
	MaxPreparedBytes int64 `json:"maxPreparedBytes"`
}

// workerModule is a module to prepare: its files (the module file pinned),
// the fetched dependencies and the pins.
type workerModule struct {
	Name        string            `json:"name"`
	Display     string            `json:"display"`
	Digest      string            `json:"digest"`
	Files       map[string][]byte `json:"files"`
	DepFiles    map[string][]byte `json:"depFiles,omitempty"`
	DepModFiles map[string][]byte `json:"depModFiles,omitempty"` // "m@v" -> pinned module.cue
	Catalogs    []Catalog         `json:"catalogs,omitempty"`
	Refuse      bool              `json:"refuse,omitempty"`
	Warnings    []string          `json:"warnings,omitempty"`
	Timoni      *timoniBuild      `json:"timoni,omitempty"` // a Timoni module's tags and values
}

// workerResult is an evaluation's outcome.
type workerResult struct {
	Objects  []workerObject `json:"objects"`
	Digest   string         `json:"digest"`
	Warnings []string       `json:"warnings,omitempty"`
}

type workerObject struct {
	Key    string          `json:"key"`
	Data   json.RawMessage `json:"data"`
	File   string          `json:"file,omitempty"`
	Line   int             `json:"line,omitempty"`
	Column int             `json:"column,omitempty"`
}

// workerError is an *Error on the wire.
type workerError struct {
	Reason  string `json:"reason"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// id is the key as a string, without credentials in the clear.
func (k preparedKey) id() string {
	data, _ := json.Marshal([]any{k.module, k.digest, k.catalogs, k.refuse, k.registry.String(), k.registry.PlainHTTP,
		k.registry.Username, k.registry.Password, k.registry.CAPEM, k.registry.VerifyID, k.cacheDir})
	sum := sha256.Sum256(data)
	return k.module + "@" + hex.EncodeToString(sum[:])
}

func toWorkerError(err error) *workerError {
	var e *Error
	if !errors.As(err, &e) {
		return &workerError{Reason: ReasonRenderFailed, Message: err.Error()}
	}
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	return &workerError{Reason: e.Reason, File: e.File, Line: e.Line, Column: e.Column, Message: msg}
}

func (w *workerError) toError() *Error {
	return &Error{Reason: w.Reason, File: w.File, Line: w.Line, Column: w.Column, Err: errors.New(w.Message)}
}

func toWorkerResult(ev evaluated) *workerResult {
	objs := make([]workerObject, len(ev.objects))
	for i, o := range ev.objects {
		objs[i] = workerObject{Key: o.key, Data: o.data, File: o.pos.file, Line: o.pos.line, Column: o.pos.col}
	}
	return &workerResult{Objects: objs, Digest: ev.digest, Warnings: ev.warnings}
}

func (w *workerResult) evaluated() evaluated {
	objs := make([]rawObject, len(w.Objects))
	for i, o := range w.Objects {
		objs[i] = rawObject{key: o.Key, data: o.Data, pos: position{file: o.File, line: o.Line, col: o.Column}}
	}
	return evaluated{objects: objs, digest: w.Digest, warnings: w.Warnings}
}

// newWorkerModule is what a worker needs to prepare src with deps.
func newWorkerModule(src *moduleSource, deps *depSet, pins *pinner) (*workerModule, error) {
	m := &workerModule{Name: src.name, Display: src.display, Digest: src.digest, Files: src.files, DepFiles: deps.files,
		DepModFiles: map[string][]byte{}, Refuse: pins.refuse, Warnings: pins.warnings(), Timoni: src.timoni}
	for mpath, v := range pins.pins {
		m.Catalogs = append(m.Catalogs, Catalog{Module: mpath, Version: v})
	}
	for mv, mf := range deps.modFiles {
		data, err := modfile.Format(mf)
		if err != nil {
			return nil, newError(ReasonRenderFailed, "failed to write the module file of %s: %w", mv, err)
		}
		m.DepModFiles[mv.String()] = data
	}
	return m, nil
}

// prepareInputs rebuilds the module in the worker; ask reads the module files
// of versions the module does not list (from the parent), which are pinned
// here.
func (m *workerModule) prepareInputs(ask func(module.Version) (*modfile.File, error)) (*moduleSource, *depSet, *pinner, error) {
	pins := newPinner(m.Catalogs, "")
	pins.refuse = m.Refuse
	for _, w := range m.Warnings {
		pins.warns[w] = true
	}
	lookup := func(mv module.Version) (*modfile.File, error) {
		mf, err := ask(mv)
		if err != nil {
			return nil, err
		}
		return pins.apply(mf, mv.String())
	}
	src := &moduleSource{name: m.Name, display: m.Display, files: m.Files, digest: m.Digest, timoni: m.Timoni}
	deps := &depSet{files: maps.Clone(m.DepFiles), modFiles: map[module.Version]*modfile.File{}, pins: pins, lookup: lookup}
	if deps.files == nil {
		deps.files = map[string][]byte{}
	}
	for s, data := range m.DepModFiles {
		mv, err := module.ParseVersion(s)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("failed to parse module version %q: %w", s, err)
		}
		if deps.modFiles[mv], err = parseModFile(data, s+"/"+modFilePath); err != nil {
			return nil, nil, nil, err
		}
	}
	return src, deps, pins, nil
}

package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"cuelang.org/go/mod/modfile"
)

// DevelopmentVersion is the module version a local Timoni module sees in its
// moduleVersion tag, as `timoni build` gives a module built from a directory.
const DevelopmentVersion = "0.0.0-devel"

// TimoniModule is a module written for Timoni (Request.Timoni), rendered as
// `timoni build` renders it: the package `main` at the module root is loaded
// with the tags name, namespace, moduleVersion and kubeVersion, the user's
// values are merged over values.cue as Timoni merges them, and the objects
// are the lists of `timoni.apply`, set after set.
type TimoniModule struct {
	// Path is the module directory inside Request.Source, relative to the
	// repository root ("./modules/x" or "modules/x"); empty when Files are
	// given.
	Path string `json:",omitempty"`
	// Files are the files of a module pulled from an OCI registry (its
	// layers extracted, verified and pulled by Digest), relative to the module
	// root. Digest stands for them in a render cache key.
	Files map[string][]byte `json:"-"`
	// Ref names a module of Files in errors, e.g.
	// "oci://registry.example.com/modules/redis@sha256:...".
	Ref string `json:",omitempty"`
	// Digest is the manifest digest of a module of Files; it becomes
	// Result.ModuleDigest.
	Digest string `json:",omitempty"`
	// Version fills the moduleVersion tag: the OCI version the module was
	// pulled by; "" means DevelopmentVersion.
	Version string `json:",omitempty"`
	// KubeVersion fills the kubeVersion tag: the cluster's Kubernetes version,
	// with or without a leading "v" (the tag gets "1.37.2"); "" means
	// DefaultKubeVersion.
	KubeVersion string `json:",omitempty"`
}

// timoniBuild is what a build adds to a Timoni module's files: the values of
// its tags and the user's values. Tags are injected when the package loads, so
// they are part of the prepared module (and of its key), as the values are.
type timoniBuild struct {
	Name          string `json:"name"`
	Namespace     string `json:"namespace"`
	ModuleVersion string `json:"moduleVersion"`
	KubeVersion   string `json:"kubeVersion"`
	Values        []byte `json:"values,omitempty"`
}

// newTimoniBuild is the build of req's Timoni module.
func newTimoniBuild(req Request) *timoniBuild {
	t := req.Timoni
	version := t.Version
	if version == "" {
		version = DevelopmentVersion
	}
	return &timoniBuild{Name: req.Name, Namespace: req.Namespace, ModuleVersion: version,
		KubeVersion: tagKubeVersion(t.KubeVersion), Values: req.Values}
}

// tagKubeVersion is the kubeVersion tag of a Kubernetes version: major.minor.patch
// without the leading "v" and without pre-release or build suffixes
// ("v1.37.2-eks-1" gives "1.37.2", "v1.31" gives "1.31.0"), as Timoni's semver
// checks expect.
func tagKubeVersion(v string) string {
	if v == "" {
		v = DefaultKubeVersion
	}
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	if strings.Count(v, ".") == 1 {
		v += ".0"
	}
	return v
}

// locateTimoni reads a Timoni module (from the repository or from its pulled
// files) and keys its prepared form by its files, its tags and the values.
func locateTimoni(req Request) (preparedKey, *moduleSource, error) {
	src, err := timoniSource(req)
	if err != nil {
		return preparedKey{}, nil, err
	}
	src.timoni = newTimoniBuild(req)
	if src.modFile, err = timoniModFile(src); err != nil {
		return preparedKey{}, nil, err
	}
	if err := src.check(); err != nil {
		return preparedKey{}, nil, err
	}
	data, _ := json.Marshal(src.timoni)
	sum := sha256.Sum256(append([]byte(src.digest+"\n"), data...))
	key := preparedKey{module: "timoni:" + src.name, digest: "sha256:" + hex.EncodeToString(sum[:])}
	return key, src, nil
}

// timoniSource reads the module's files: a directory of the repository or the
// files of an OCI artifact.
func timoniSource(req Request) (*moduleSource, error) {
	t := req.Timoni
	maxBytes := req.Limits.withDefaults().MaxModuleBytes
	if t.Files != nil {
		if t.Path != "" {
			return nil, newError(ReasonRenderFailed, "Timoni module names both a path and the files of %s", t.Ref)
		}
		name := strings.TrimSuffix(t.Ref, "/")
		files, err := readTimoniFiles(newMemFS(t.Files), ".", name+"/", maxBytes, nil)
		if err != nil {
			return nil, err
		}
		return &moduleSource{name: name, display: name + "/", files: files, digest: t.Digest}, nil
	}
	dir, err := cleanLocalPath(t.Path)
	if err != nil {
		return nil, err
	}
	if req.Source == nil {
		return nil, newError(ReasonModuleNotFound, "Timoni module %q: no source tree", dir)
	}
	display := dir + "/"
	if dir == "." {
		display = ""
	}
	files, err := readTimoniFiles(req.Source, dir, display, maxBytes, ownerOf(req.Tenants))
	if err != nil {
		return nil, err
	}
	return &moduleSource{name: dir, display: display, files: files, digest: filesDigest(files)}, nil
}

// timoniModFile parses the module's cue.mod/module.cue, which every Timoni
// module has. Its dependencies would come from a registry: a Timoni module
// vendors what it imports under cue.mod/gen and cue.mod/pkg instead.
func timoniModFile(src *moduleSource) (*modfile.File, error) {
	data, ok := src.files[modFilePath]
	if !ok {
		return nil, &Error{Reason: ReasonModuleNotFound, File: src.display + modFilePath,
			Err: fmt.Errorf("Timoni module %q has no cue.mod/module.cue (timoni mod init writes one)", src.name)}
	}
	mf, err := modfile.ParseNonStrict(data, src.display+modFilePath)
	if err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	if len(mf.Deps) > 0 {
		return nil, &Error{Reason: ReasonRenderFailed, File: src.display + modFilePath,
			Err: fmt.Errorf("Timoni module %q lists module dependencies, which cairn does not fetch for a Timoni module: vendor them under cue.mod/pkg (timoni mod vendor)", src.name)}
	}
	return mf, nil
}

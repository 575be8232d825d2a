package render

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/modzip"
)

// PushModule publishes the CUE module in dir (which holds
// cue.mod/module.cue) to reg at version, in CUE's registry format (the same
// as `cue mod publish`), with reg's credentials if any. It returns the
// manifest digest.
// Symbolic links and other irregular files are refused.
func PushModule(ctx context.Context, dir string, reg ModuleRegistry, version string) (string, error) {
	mf, err := readModFile(dir)
	if err != nil {
		return "", err
	}
	mv, err := moduleVersion(mf.QualifiedModule(), version)
	if err != nil {
		return "", err
	}
	if err := checkRegularFiles(dir); err != nil {
		return "", err
	}
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, mv, dir); err != nil {
		return "", newError(ReasonUnsafeModule, "failed to pack module %s: %w", mv, err)
	}
	client := newRegistryClient(reg)
	if err := client.PutModule(ctx, mv, bytes.NewReader(zip.Bytes()), int64(zip.Len())); err != nil {
		return "", newError(ReasonFetchFailed, "failed to push module %s: %w", mv, err)
	}
	m, err := client.GetModule(ctx, mv)
	if err != nil {
		return "", newError(ReasonFetchFailed, "failed to read back module %s: %w", mv, err)
	}
	return string(m.ManifestDigest()), nil
}

// PushedRepository returns the OCI repository that PushModule(dir, reg, ...)
// writes to: the module path of dir without its major version, under reg's
// prefix.
func PushedRepository(dir string, reg ModuleRegistry) (string, error) {
	mf, err := readModFile(dir)
	if err != nil {
		return "", err
	}
	return ModuleRepository(reg, mf.QualifiedModule()), nil
}

// readModFile reads the cue.mod/module.cue of a module directory.
func readModFile(dir string) (*modfile.File, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(modFilePath)))
	if err != nil {
		return nil, newError(ReasonModuleNotFound, "%s is not a CUE module: %w", dir, err)
	}
	return parseModFile(data, modFilePath)
}

// checkRegularFiles refuses a module directory holding symbolic links or
// other irregular files (modzip would silently leave them out).
func checkRegularFiles(dir string) error {
	_, err := readModuleFiles(os.DirFS(dir), ".", "")
	return err
}

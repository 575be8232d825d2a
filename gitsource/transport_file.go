package gitsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// localTransport serves file:// URLs with go-git's in-process server instead
// of go-git's file transport, which executes git-upload-pack.
type localTransport struct{}

func (localTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	sto, err := openLocalRepository(ep.Path)
	if err != nil {
		return nil, err
	}
	sess, err := server.NewClient(fixedLoader{sto}).NewUploadPackSession(ep, nil)
	if err != nil {
		return nil, err
	}
	return &localSession{UploadPackSession: sess, sto: sto}, nil
}

func (localTransport) NewReceivePackSession(*transport.Endpoint, transport.AuthMethod) (transport.ReceivePackSession, error) {
	return nil, errors.New("push is not supported")
}

// openLocalRepository opens a bare repository or the .git directory of a
// working tree.
func openLocalRepository(dir string) (storer.Storer, error) {
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, ".git")
	}
	for _, name := range []string{"objects", "refs", "HEAD"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return nil, transport.ErrRepositoryNotFound
		}
	}
	return filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), nil
}

type fixedLoader struct{ sto storer.Storer }

func (l fixedLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.sto, nil }

// localSession drops the haves the repository does not know (a cache that
// saw a since force-pushed commit): a Git server ignores them, go-git's
// in-process server would fail the whole request.
type localSession struct {
	transport.UploadPackSession
	sto storer.Storer
}

func (s *localSession) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	known := req.Haves[:0:0]
	for _, h := range req.Haves {
		if s.sto.HasEncodedObject(h) == nil {
			known = append(known, h)
		}
	}
	req.Haves = known
	return s.UploadPackSession.UploadPack(ctx, req)
}

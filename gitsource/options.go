package gitsource

import (
	"os"
	"path/filepath"
	"time"
)

// Auth holds the credentials of a remote: at most one of basic auth
// (Username/Password, or Password alone as a token) or SSH.
type Auth struct {
	Username, Password string
	SSHPrivateKey      []byte
	SSHPassphrase      string
	// KnownHosts (known_hosts format) is required for ssh: the host key is
	// checked against it, never against the user's files.
	KnownHosts []byte
}

// Limits bounds what a fetch and a tree may hold.
type Limits struct {
	MaxFileBytes  int64 // default 16 MiB
	MaxTotalBytes int64 // default 512 MiB; also caps the bytes of one fetch
	MaxFiles      int   // default 50_000; directories are capped at the same count
}

// DefaultLimits returns the limits used for any zero field of Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:  16 << 20,
		MaxTotalBytes: 512 << 20,
		MaxFiles:      50_000,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	return l
}

// Options configures a Source.
type Options struct {
	// URL is https://, ssh:// or scp-like git@host:path, or file:// (local).
	// Anything else (ext::, git://, http:// unless AllowHTTP, arguments
	// starting with '-') is rejected with ErrUnsupportedURL.
	URL string
	// Branch is the tracked branch; default "main".
	Branch string
	// CacheDir holds the cache clones, one per URL (<CacheDir>/<hash of URL>);
	// default <user cache dir>/cairn/git.
	CacheDir string
	Auth     *Auth
	// Timeout is the deadline of each network step, ref resolution included;
	// default 60s.
	Timeout time.Duration
	Limits  Limits
	// AllowHTTP permits plain http:// (tests with a loopback server).
	AllowHTTP bool
}

const (
	defaultBranch  = "main"
	defaultTimeout = 60 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Branch == "" {
		o.Branch = defaultBranch
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultCacheDir()
	}
	o.Limits = o.Limits.withDefaults()
	return o
}

func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "cairn", "git")
}

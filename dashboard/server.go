package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler/plans"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	// Reader reads the CRs cairn keeps (ModuleInstances, the Platform), from an
	// informer cache: pages are served from it, never from a LIST per request.
	Reader client.Reader
	// Live reads what the cache does not hold (Events, inventories kept in
	// Secrets, the live objects of an inventory), with the server's identity.
	Live client.Client
	// Auth tells who a request comes from; Authz what they may see and do.
	Auth  Authenticator
	Authz Authorizer
	// Act gives the client a user's requests and reads are made with (see Actor).
	Act Actor
	// KeyInURL lets /login?key=... start a session (the local dashboard's printed
	// URL); never for the controller's, whose credentials are tokens.
	KeyInURL bool
	// Namespace is cairn's own namespace (inventories kept in Secrets live there).
	Namespace string
	// CommitURL links a revision to its commit on the forge ("" when unknown);
	// nil: no links.
	CommitURL func(sha string) string
	// Plans are the pull requests' plans (nil: none kept).
	Plans *plans.Store
	Log   logr.Logger
}

// Server serves the dashboard.
type Server struct {
	opts  Options
	pages *pages
	hub   *Hub
	// streams counts the open event streams.
	streams streamCounts
	mux     *http.ServeMux
}

// New returns a Server for opts; its Hub must be fed the changes of the cache
// (Hub().Changed) for pages to update live.
func New(opts Options) (*Server, error) {
	if opts.Reader == nil || opts.Auth == nil || opts.Authz == nil {
		return nil, errors.New("dashboard: a reader, an authenticator and an authorizer are required")
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, pages: p, hub: NewHub(), mux: http.NewServeMux()}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheForever(http.FileServerFS(static))))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.authed(s.logout))
	s.mux.HandleFunc("GET /{$}", s.authed(s.fleet))
	s.mux.HandleFunc("GET /instances/{namespace}/{name}", s.authed(s.instance))
	s.mux.HandleFunc("GET /instances/{namespace}/{name}/object", s.authed(s.object))
	s.mux.HandleFunc("POST /instances/{namespace}/{name}/{action}", s.authed(s.action))
	s.mux.HandleFunc("GET /pulls", s.authed(s.pulls))
	s.mux.HandleFunc("GET /pulls/{number}", s.authed(s.pull))
	s.mux.HandleFunc("GET /events", s.authed(s.events))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return s, nil
}

// Hub is where the cache's changes are told, for the live pages.
func (s *Server) Hub() *Hub { return s.hub }

// ServeHTTP serves the dashboard with its security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// cacheForever lets the browser keep the embedded assets (they change only with
// the binary, and their URLs carry its version).
func cacheForever(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		h.ServeHTTP(w, r)
	})
}

// Serve serves s on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, s *Server, log logr.Logger) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.hub.Close()
		_ = srv.Shutdown(shut)
		log.Info("dashboard stopped")
		return nil
	}
}

package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// sessionCookie holds the credential of a browser's session: the bearer token it
// logged in with (checked again by a TokenReview, cached briefly), or the local
// session's secret.
const sessionCookie = "cairn-session"

// ErrUnauthenticated: the credential is not valid.
var ErrUnauthenticated = errors.New("not authenticated")

// Identity is who a request comes from, as the cluster authenticated them.
type Identity struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
	// Anonymous: no credential, with anonymous reading allowed.
	Anonymous bool
	// session is the credential, from which the CSRF token is derived.
	session string
}

// Authenticator tells who holds a credential.
type Authenticator interface {
	// Authenticate returns the identity of credential, or ErrUnauthenticated.
	Authenticate(ctx context.Context, credential string) (*Identity, error)
	// Anonymous is the identity of a request without a credential; nil when
	// anonymous access is off.
	Anonymous() *Identity
}

// TokenReviewer authenticates bearer tokens with the TokenReview API, as the API
// server would: ServiceAccount tokens and the cluster's OIDC tokens alike.
type TokenReviewer struct {
	Client client.Client
	// AnonymousRead lets requests without a token read (never act) as
	// system:anonymous.
	AnonymousRead bool
	// TTL is how long an answer is reused (default 30 s).
	TTL time.Duration

	mu    sync.Mutex
	cache map[[32]byte]reviewed
}

type reviewed struct {
	id      *Identity
	expires time.Time
}

// maxCached bounds the reviews kept: a flood of bad tokens costs TokenReviews,
// never memory.
const maxCached = 4096

func (t *TokenReviewer) Anonymous() *Identity {
	if !t.AnonymousRead {
		return nil
	}
	return &Identity{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, Anonymous: true}
}

func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (*Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	t.mu.Lock()
	if r, ok := t.cache[key]; ok && now.Before(r.expires) {
		t.mu.Unlock()
		if r.id == nil {
			return nil, ErrUnauthenticated
		}
		return r.id, nil
	}
	t.mu.Unlock()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := t.Client.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("failed to review the token: %w", err) // never the token
	}
	var id *Identity
	if u := review.Status.User; review.Status.Authenticated && strings.TrimSpace(u.Username) != "" {
		id = &Identity{User: u.Username, UID: u.UID, Groups: u.Groups, session: token}
		if len(u.Extra) > 0 {
			id.Extra = map[string][]string{}
			for k, v := range u.Extra {
				id.Extra[k] = v
			}
		}
	}
	ttl := t.TTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	t.mu.Lock()
	if t.cache == nil || len(t.cache) >= maxCached {
		t.cache = map[[32]byte]reviewed{}
	}
	t.cache[key] = reviewed{id: id, expires: now.Add(ttl)}
	t.mu.Unlock()
	if id == nil {
		return nil, ErrUnauthenticated // an identity that maps to no user too
	}
	return id, nil
}

// LocalSession authenticates the one user of `cairn dashboard`: the holder of the
// secret in the URL it printed acts as the kubeconfig's identity.
type LocalSession struct {
	Secret string
	User   Identity
}

func (l *LocalSession) Anonymous() *Identity { return nil }

func (l *LocalSession) Authenticate(_ context.Context, credential string) (*Identity, error) {
	if l.Secret == "" || subtle.ConstantTimeCompare([]byte(credential), []byte(l.Secret)) != 1 {
		return nil, ErrUnauthenticated
	}
	id := l.User
	id.session = credential
	return &id, nil
}

// Access is what a request would do: a verb on a resource of cairn's API group,
// in a namespace ("" for every namespace, or a cluster-scoped resource).
type Access struct {
	Verb, Resource, Namespace string
}

// Authorizer tells whether an identity may do something.
type Authorizer interface {
	Allowed(ctx context.Context, id *Identity, a Access) (bool, error)
}

// SubjectAccessReviewer asks the API server (SubjectAccessReview), as the
// controller's identity, whether the user may; answers are kept briefly. An
// anonymous identity may read everything and do nothing (--dashboard-anonymous-read).
type SubjectAccessReviewer struct {
	Client client.Client
	// TTL is how long an answer is reused (default 10 s).
	TTL time.Duration

	mu    sync.Mutex
	cache map[string]answer
}

type answer struct {
	allowed bool
	expires time.Time
}

func (s *SubjectAccessReviewer) Allowed(ctx context.Context, id *Identity, a Access) (bool, error) {
	if id.Anonymous {
		return readOnly(a.Verb), nil
	}
	key := strings.Join([]string{id.User, id.UID, strings.Join(id.Groups, ","), a.Verb, a.Resource, a.Namespace}, "\x00")
	now := time.Now()
	s.mu.Lock()
	if r, ok := s.cache[key]; ok && now.Before(r.expires) {
		s.mu.Unlock()
		return r.allowed, nil
	}
	s.mu.Unlock()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.User, UID: id.UID, Groups: id.Groups, Extra: extraValues(id.Extra),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: cairnv1.GroupVersion.Group, Resource: a.Resource},
	}}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("failed to review access: %w", err)
	}
	ttl := s.TTL
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	s.mu.Lock()
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = map[string]answer{}
	}
	s.cache[key] = answer{allowed: review.Status.Allowed, expires: now.Add(ttl)}
	s.mu.Unlock()
	return review.Status.Allowed, nil
}

func readOnly(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

func extraValues(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := map[string]authorizationv1.ExtraValue{}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// SelfAccessReviewer asks the API server whether the client's own identity may
// (SelfSubjectAccessReview): the local dashboard's user is the kubeconfig's.
type SelfAccessReviewer struct {
	Client client.Client
}

func (s *SelfAccessReviewer) Allowed(ctx context.Context, _ *Identity, a Access) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: cairnv1.GroupVersion.Group, Resource: a.Resource},
	}}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("failed to review access: %w", err)
	}
	return review.Status.Allowed, nil
}

// Actor gives the client a user's requests are made with.
type Actor interface {
	As(id *Identity) (client.Client, error)
}

// Impersonator makes requests as the user (impersonation: the user's name, uid and
// groups), so the API server's own authorization and audit apply to them. The
// user's extra attributes are left out: RBAC cannot grant the impersonation of
// extras by a wildcard, and RBAC decides by user and groups.
type Impersonator struct {
	Config  *rest.Config
	Options client.Options
}

func (i *Impersonator) As(id *Identity) (client.Client, error) {
	if id.Anonymous || id.User == "" {
		return nil, errors.New("an anonymous request makes no change")
	}
	cfg := rest.CopyConfig(i.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.User, UID: id.UID, Groups: id.Groups}
	return client.New(cfg, i.Options) // Options.Mapper shared: no discovery per request
}

// Self makes requests as the client's own identity (the local dashboard).
type Self struct{ Client client.Client }

func (s Self) As(*Identity) (client.Client, error) { return s.Client, nil }

// credential is the request's bearer token, else its session cookie.
func credential(r *http.Request) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if v, err := url.QueryUnescape(c.Value); err == nil {
			return v
		}
	}
	return ""
}

type handler func(w http.ResponseWriter, r *http.Request, id *Identity)

// authed serves h to an authenticated request; a browser without a session is
// sent to the login page.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var id *Identity
		if cred := credential(r); cred != "" {
			var err error
			id, err = s.opts.Auth.Authenticate(r.Context(), cred)
			switch {
			case errors.Is(err, ErrUnauthenticated):
				s.clearSession(w, r)
				id = nil
			case err != nil:
				s.opts.Log.Error(err, "authentication failed")
				http.Error(w, "authentication is not available: try again", http.StatusServiceUnavailable)
				return
			}
		}
		if id == nil {
			id = s.opts.Auth.Anonymous()
		}
		if id == nil {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		h(w, r, id)
	}
}

// csrfToken is the token the forms of id's pages carry: an HMAC of its session,
// so a page of another origin cannot forge it.
func (s *Server) csrfToken(id *Identity) string {
	if id.session == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.csrf)
	m.Write([]byte("csrf\x00" + id.session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF refuses a state-changing request whose token is not id's, or whose
// Origin is another site.
func (s *Server) checkCSRF(r *http.Request, id *Identity) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errors.New("a request from another origin")
		}
	}
	want := s.csrfToken(id)
	if want == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(want)) != 1 {
		return errors.New("the form's CSRF token is missing or wrong: reload the page")
	}
	return nil
}

func (s *Server) setSession(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: url.QueryEscape(value), Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds())})
}

func (s *Server) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// loginPage asks for a token; the local dashboard's URL carries its key instead.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if key := r.URL.Query().Get("key"); key != "" {
		if _, err := s.opts.Auth.Authenticate(r.Context(), key); err == nil {
			s.setSession(w, r, key)
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	s.render(w, r, "login", http.StatusOK, &page{Title: "Log in"})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, "a request from another origin", http.StatusForbidden)
			return
		}
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if _, err := s.opts.Auth.Authenticate(r.Context(), token); err != nil || token == "" {
		s.render(w, r, "login", http.StatusUnauthorized, &page{Title: "Log in",
			Error: "The token was not accepted: give a ServiceAccount token (kubectl create token NAME) or your OIDC token."})
		return
	}
	s.setSession(w, r, token)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, id *Identity) {
	if err := s.checkCSRF(r, id); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	s.clearSession(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
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

	once    sync.Once
	answers *ttlCache[[32]byte, *Identity] // nil: refused
	limit   *rate.Limiter
}

// Bounds of the token reviews: answers kept 30 s, at most 4096 (the least
// recently used go first); reviews of tokens not known already at most 20 a second
// with bursts of 40, so a flood of bad tokens costs the API server that much and
// no more (it is answered 503 beyond).
const (
	reviewTTL   = 30 * time.Second
	maxAnswers  = 4096
	reviewRate  = 20
	reviewBurst = 40
)

// ErrBusy: too many new tokens to review at once.
var ErrBusy = errors.New("too many logins at once: try again")

func (t *TokenReviewer) init() {
	t.once.Do(func() {
		t.answers = newTTLCache[[32]byte, *Identity](maxAnswers, reviewTTL)
		t.limit = rate.NewLimiter(reviewRate, reviewBurst)
	})
}

func (t *TokenReviewer) Anonymous() *Identity {
	if !t.AnonymousRead {
		return nil
	}
	return &Identity{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, Anonymous: true}
}

func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (*Identity, error) {
	t.init()
	key := sha256.Sum256([]byte(token))
	if id, ok := t.answers.get(key); ok {
		if id == nil {
			return nil, ErrUnauthenticated
		}
		return id, nil
	}
	if !t.limit.Allow() {
		return nil, ErrBusy
	}
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
	t.answers.put(key, id)
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
// controller's identity, whether the user may; answers are kept 10 s (at most
// 16384, the least recently used going first). An anonymous identity may read
// everything and do nothing (--dashboard-anonymous-read).
type SubjectAccessReviewer struct {
	Client client.Client

	once    sync.Once
	answers *ttlCache[string, bool]
}

func (s *SubjectAccessReviewer) Allowed(ctx context.Context, id *Identity, a Access) (bool, error) {
	if id.Anonymous {
		return readOnly(a.Verb), nil
	}
	s.once.Do(func() { s.answers = newTTLCache[string, bool](4*maxAnswers, 10*time.Second) })
	raw, err := json.Marshal([]any{id.User, id.UID, id.Groups, id.Extra, a})
	if err != nil {
		return false, err
	}
	key := string(raw)
	if ok, hit := s.answers.get(key); hit {
		return ok, nil
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.User, UID: id.UID, Groups: id.Groups, Extra: extraValues(id.Extra),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: cairnv1.GroupVersion.Group, Resource: a.Resource},
	}}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("failed to review access: %w", err)
	}
	s.answers.put(key, review.Status.Allowed)
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

// UserToken makes requests with the user's own bearer token, the one they logged
// in with: the API server authenticates, authorises and audits each as theirs,
// with all of the user's attributes, and cairn needs no right to impersonate
// anyone. Clients are kept 5 minutes per token (their connections reused).
type UserToken struct {
	// Config is the server's: its host and CA; its own credentials are dropped.
	Config  *rest.Config
	Options client.Options

	once    sync.Once
	clients *ttlCache[[32]byte, client.Client]
}

func (u *UserToken) As(id *Identity) (client.Client, error) {
	if id.Anonymous || id.User == "" || id.session == "" {
		return nil, errors.New("an anonymous request reads and makes nothing as a user")
	}
	u.once.Do(func() { u.clients = newTTLCache[[32]byte, client.Client](256, 5*time.Minute) })
	key := sha256.Sum256([]byte(id.session))
	if c, ok := u.clients.get(key); ok {
		return c, nil
	}
	cfg := rest.AnonymousClientConfig(u.Config) // the host and CA, none of the server's credentials
	cfg.BearerToken = id.session
	c, err := client.New(cfg, u.Options) // Options.Mapper shared: no discovery per user
	if err != nil {
		return nil, err
	}
	u.clients.put(key, c)
	return c, nil
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
			case errors.Is(err, ErrBusy):
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
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

// csrfToken is the token the forms of id's pages carry: a digest of its session
// (a secret a page of another origin does not have), the same on every replica.
func (s *Server) csrfToken(id *Identity) string {
	if id.session == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("cairn-dashboard-csrf\x00" + id.session))
	return base64.RawURLEncoding.EncodeToString(sum[:])
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

// setSession keeps the session's credential in a cookie no script reads, sent
// only over HTTPS (or to this machine: browsers count http://localhost and
// 127.0.0.1 as secure), only to this site.
func (s *Server) setSession(w http.ResponseWriter, _ *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: url.QueryEscape(value), Path: "/", HttpOnly: true,
		Secure: true, SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds())})
}

func (s *Server) clearSession(w http.ResponseWriter, _ *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// loginPage asks for a token; the local dashboard's URL carries its key instead.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if key := r.URL.Query().Get("key"); key != "" && s.opts.KeyInURL {
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

package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"cairn.dev/cairn/gitsource/forge"
)

// Comment is a comment (GitLab: note) as the backends list them.
type Comment struct {
	ID     int64
	Body   string
	Author string
}

// FindPlanComment returns the first (oldest) comment that is a plan comment
// written by login. A comment by anyone else that carries the marker is not
// cairn's, and is left alone.
func FindPlanComment(comments []Comment, login string) (Comment, bool) {
	for _, c := range comments {
		if strings.EqualFold(c.Author, login) && forge.IsPlanComment(c.Body) {
			return c, true
		}
	}
	return Comment{}, false
}

// CommentStore is one backend's comment API on one pull request.
type CommentStore struct {
	List   func(ctx context.Context) ([]Comment, error)
	Create func(ctx context.Context, body string) error
	Edit   func(ctx context.Context, id int64, body string) error
}

// Upsert edits the plan comment by login in place, or creates it when there
// is none; a comment that already holds body is left untouched.
func Upsert(ctx context.Context, store CommentStore, login, body string) error {
	comments, err := store.List(ctx)
	if err != nil {
		return err
	}
	existing, ok := FindPlanComment(comments, login)
	switch {
	case !ok:
		return store.Create(ctx, body)
	case existing.Body == body:
		return nil
	default:
		return store.Edit(ctx, existing.ID, body)
	}
}

// Login caches the login of the token's account, asked once of the forge.
type Login struct {
	mu    sync.Mutex
	login string
	fetch func(ctx context.Context) (string, error)
}

// NewLogin returns a Login that answers fixed when it is set, otherwise asks
// fetch once (and again after a failure).
func NewLogin(fixed string, fetch func(ctx context.Context) (string, error)) *Login {
	return &Login{login: fixed, fetch: fetch}
}

// Get returns the login.
func (l *Login) Get(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.login != "" {
		return l.login, nil
	}
	login, err := l.fetch(ctx)
	if err != nil {
		return "", err
	}
	if login == "" {
		return "", fmt.Errorf("%w: the forge did not name the token's account (set the login)", forge.ErrInvalid)
	}
	l.login = login
	return login, nil
}

var linkNext = regexp.MustCompile(`<[^>]*[?&]page=(\d+)[^>]*>;\s*rel="next"`)

// NextPage reads the next page number from a Link header (GitHub) or
// X-Next-Page (GitLab); 0 when there is none.
func NextPage(h http.Header) int {
	if v := h.Get("X-Next-Page"); v != "" {
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		return n
	}
	for _, link := range strings.Split(h.Get("Link"), ",") {
		if m := linkNext.FindStringSubmatch(link); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// MaxPages bounds the pages of comments read on one pull request.
const MaxPages = 50

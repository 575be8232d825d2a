package contract

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"
)

// Exchange is one expected request and its recorded answer.
type Exchange struct {
	Method string
	// Path is the escaped request path, as the forge's documentation spells
	// it (e.g. /api/v4/projects/group%2Fproject/statuses/SHA).
	Path string
	// Query holds parameters the request must carry (others are allowed).
	Query url.Values
	// Header holds headers the request must carry with exactly these values.
	Header http.Header
	// Body is the JSON the request body must equal (as JSON values); empty
	// means no body check.
	Body string
	// Status, RespHeader and Response make up the answer (Status defaults
	// to 200).
	Status     int
	RespHeader http.Header
	Response   string
}

// Server replays a script of exchanges.
type Server struct {
	*httptest.Server
	t      testing.TB
	mu     sync.Mutex
	script []Exchange
	next   int
	// Bodies holds the request bodies received, in order.
	Bodies []string
}

// New starts a Server for script; it is closed and checked for unused
// exchanges when the test ends.
func New(t testing.TB, script ...Exchange) *Server {
	s := &Server{t: t, script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.next != len(s.script) {
			t.Errorf("contract: %d of %d exchanges were not requested; next: %s %s",
				len(s.script)-s.next, len(s.script), s.script[s.next].Method, s.script[s.next].Path)
		}
	})
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.Bodies = append(s.Bodies, string(body))
	if s.next >= len(s.script) {
		s.mu.Unlock()
		s.t.Errorf("contract: unexpected request %s %s", r.Method, r.URL.EscapedPath())
		http.Error(w, "unexpected request", http.StatusTeapot)
		return
	}
	ex := s.script[s.next]
	s.next++
	s.mu.Unlock()
	if err := check(ex, r, body); err != nil {
		s.t.Errorf("contract: request %s %s: %v", r.Method, r.URL.EscapedPath(), err)
		http.Error(w, err.Error(), http.StatusTeapot)
		return
	}
	for k, v := range ex.RespHeader {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(max(ex.Status, 200))
	_, _ = io.WriteString(w, ex.Response)
}

func check(ex Exchange, r *http.Request, body []byte) error {
	if r.Method != ex.Method || r.URL.EscapedPath() != ex.Path {
		return fmt.Errorf("want %s %s", ex.Method, ex.Path)
	}
	for k, want := range ex.Query {
		if got := r.URL.Query()[k]; !reflect.DeepEqual(got, want) {
			return fmt.Errorf("query %s = %q, want %q", k, got, want)
		}
	}
	for k, want := range ex.Header {
		if got := r.Header.Values(k); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if ex.Body == "" {
		return nil
	}
	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		return fmt.Errorf("body is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(ex.Body), &want); err != nil {
		return fmt.Errorf("recorded body is not JSON: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("body = %s, want %s", body, ex.Body)
	}
	return nil
}

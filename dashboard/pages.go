package dashboard

import (
	"bytes"
	"html/template"
	"net/http"
	"strings"
)

// page is what every template is given.
type page struct {
	Title string
	// User is who is logged in ("" on the login page), CSRF the token of its forms.
	User, CSRF string
	Anonymous  bool
	// Scope is the namespace whose changes refresh the page ("" for all).
	Scope    string
	Error    string
	Fleet    *fleetView
	Instance *instanceView
	Pulls    *pullsView
	Pull     *pullView
	Object   *objectView
}

type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"since": since, "short": short, "eventTime": eventTime, "oneLine": joinLines,
	"lower": strings.ToLower, "diffLines": diffLines,
}

// diffLine is one line of a unified diff and how it is drawn.
type diffLine struct{ Class, Text string }

// diffLines splits a unified diff for drawing: added, removed, hunk and context
// lines (the text stays text: the template escapes it).
func diffLines(diff string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		c := "ctx"
		switch {
		case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
			c = "file"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		}
		out = append(out, diffLine{c, l})
	}
	return out
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range []string{"fleet", "instance", "pulls", "pull", "object", "login", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.byName[name] = t
	}
	return p, nil
}

// render writes the page name, rendered whole before anything is sent (a
// template error is a 500, not half a page).
func (s *Server) render(w http.ResponseWriter, _ *http.Request, name string, code int, p *page) {
	var buf bytes.Buffer
	if err := s.pages.byName[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		s.opts.Log.Error(err, "failed to render a dashboard page", "page", name)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) base(id *Identity, title string) *page {
	return &page{Title: title, User: id.User, CSRF: s.csrfToken(id), Anonymous: id.Anonymous}
}

// fail shows an error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, id *Identity, code int, msg string) {
	p := s.base(id, "Error")
	p.Error = msg
	s.render(w, r, "error", code, p)
}

// fleet serves the fleet page.
func (s *Server) fleet(w http.ResponseWriter, r *http.Request, id *Identity) {
	q := r.URL.Query()
	v, err := s.fleetOf(r.Context(), id, filter{Tenant: q.Get("tenant"), Namespace: q.Get("namespace"), State: q.Get("state")})
	if err != nil {
		s.opts.Log.Error(err, "failed to build the fleet page")
		s.fail(w, r, id, http.StatusServiceUnavailable, "the fleet could not be read: try again")
		return
	}
	p := s.base(id, "Fleet")
	p.Fleet = v
	s.render(w, r, "fleet", http.StatusOK, p)
}

// instance serves an instance's page.
func (s *Server) instance(w http.ResponseWriter, r *http.Request, id *Identity) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	v, ok, err := s.instanceOf(r.Context(), id, ns, name)
	switch {
	case err != nil:
		s.opts.Log.Error(err, "failed to build an instance page")
		s.fail(w, r, id, http.StatusServiceUnavailable, "the instance could not be read: try again")
		return
	case !ok:
		s.fail(w, r, id, http.StatusNotFound, "no ModuleInstance "+ns+"/"+name+" that you may see")
		return
	}
	v.Done = r.URL.Query().Get("done")
	p := s.base(id, ns+"/"+name)
	p.Instance, p.Scope = v, ns
	s.render(w, r, "instance", http.StatusOK, p)
}

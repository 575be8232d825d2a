package gitsource

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// remote is a validated repository URL split into a credential-free endpoint,
// the form used in messages, and any credentials the URL carried.
type remote struct {
	endpoint *transport.Endpoint
	safeURL  string // no userinfo: the only form that appears in errors
	user     string // from the URL's userinfo
	password string
}

var (
	// transportHelper matches git's "<helper>::<address>" syntax (ext::, fd::).
	transportHelper = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)
	// scpLike matches [user@]host:path with a host that is a name or [address].
	scpLike = regexp.MustCompile(`^(?:([A-Za-z0-9._~-]+)@)?([A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):(.+)$`)
)

// parseRemote validates raw and returns the remote it names.
func parseRemote(raw string, allowHTTP bool) (*remote, error) {
	if err := checkURLText(raw); err != nil {
		return nil, err
	}
	if strings.Contains(raw, "://") {
		return parseSchemeURL(raw, allowHTTP)
	}
	if m := scpLike.FindStringSubmatch(raw); m != nil {
		return parseSCP(m[1], m[2], m[3])
	}
	return nil, unsupported(raw, "not an https, ssh or file URL")
}

func checkURLText(raw string) error {
	switch {
	case raw == "":
		return unsupported(raw, "empty")
	case strings.HasPrefix(raw, "-"):
		return unsupported(raw, "starts with '-'")
	case transportHelper.MatchString(raw):
		return unsupported(raw, "transport helpers are not allowed")
	case strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return unsupported(raw, "contains spaces or control characters")
	}
	return nil
}

func parseSchemeURL(raw string, allowHTTP bool) (*remote, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, unsupported(raw, "malformed")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, unsupported(raw, "query, fragment or opaque part")
	}
	switch u.Scheme {
	case "https", "ssh":
	case "http":
		if !allowHTTP {
			return nil, unsupported(raw, "plain http is not allowed")
		}
	case "file":
		return parseFileURL(u)
	default:
		return nil, unsupported(raw, fmt.Sprintf("scheme %q is not allowed", u.Scheme))
	}
	return newNetworkRemote(u)
}

func newNetworkRemote(u *url.URL) (*remote, error) {
	host := u.Hostname()
	if host == "" || strings.HasPrefix(host, "-") {
		return nil, unsupported(redact(u), "missing or argument-like host")
	}
	if strings.HasPrefix(strings.TrimPrefix(u.Path, "/"), "-") {
		return nil, unsupported(redact(u), "argument-like path")
	}
	r := &remote{safeURL: redact(u)}
	if u.User != nil {
		r.user = u.User.Username()
		r.password, _ = u.User.Password()
	}
	if u.Scheme == "ssh" && r.password != "" {
		return nil, unsupported(r.safeURL, "ssh passwords are not supported")
	}
	clean := *u
	clean.User = nil
	if u.Scheme == "ssh" && r.user != "" {
		clean.User = url.User(r.user)
	}
	return r.withEndpoint(clean.String())
}

func parseFileURL(u *url.URL) (*remote, error) {
	if u.User != nil || (u.Host != "" && u.Host != "localhost") {
		return nil, unsupported(redact(u), "file URLs take no host or userinfo")
	}
	p := strings.TrimSuffix(u.Path, "/")
	if !path.IsAbs(p) || path.Clean(p) != p {
		return nil, unsupported(redact(u), "file URLs need a clean absolute path")
	}
	r := &remote{safeURL: "file://" + p}
	return r.withEndpoint(r.safeURL)
}

func parseSCP(user, host, p string) (*remote, error) {
	raw := host + ":" + p
	if strings.HasPrefix(p, "-") || strings.HasPrefix(p, "//") {
		return nil, unsupported(raw, "argument-like or malformed path")
	}
	switch strings.ToLower(host) {
	case "file", "http", "https", "ssh", "git":
		return nil, unsupported(raw, "a scheme without '//' is ambiguous")
	}
	r := &remote{safeURL: raw, user: user}
	ep, err := transport.NewEndpoint(scpWithUser(user, raw))
	if err != nil || ep.Protocol != "ssh" {
		return nil, unsupported(raw, "malformed scp-like address")
	}
	r.endpoint = ep
	return r, nil
}

func scpWithUser(user, hostPath string) string {
	if user == "" {
		return hostPath
	}
	return user + "@" + hostPath
}

func (r *remote) withEndpoint(s string) (*remote, error) {
	ep, err := transport.NewEndpoint(s)
	if err != nil {
		return nil, unsupported(r.safeURL, "malformed")
	}
	r.endpoint = ep
	return r, nil
}

// redact returns u without userinfo.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// redactRaw strips the userinfo from a URL that may not parse, for messages.
func redactRaw(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	authority := rest
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		authority = rest[:j]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	return prefix + rest
}

func unsupported(raw, why string) error {
	return fmt.Errorf("failed to parse URL %q: %w: %s", redactRaw(raw), ErrUnsupportedURL, why)
}

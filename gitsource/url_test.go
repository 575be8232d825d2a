package gitsource

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
)

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		url       string
		allowHTTP bool
		protocol  string // "" = rejected with ErrUnsupportedURL
		safe      string
	}{
		{url: "https://github.com/org/repo.git", protocol: "https", safe: "https://github.com/org/repo.git"},
		{url: "https://x-token:" + testPassword + "@github.com/org/repo.git", protocol: "https", safe: "https://github.com/org/repo.git"},
		{url: "ssh://git@github.com/org/repo.git", protocol: "ssh", safe: "ssh://github.com/org/repo.git"},
		{url: "ssh://git@[::1]:2222/org/repo.git", protocol: "ssh", safe: "ssh://[::1]:2222/org/repo.git"},
		{url: "git@github.com:org/repo.git", protocol: "ssh", safe: "github.com:org/repo.git"},
		{url: "github.com:org/repo.git", protocol: "ssh", safe: "github.com:org/repo.git"},
		{url: "file:///srv/git/repo.git", protocol: "file", safe: "file:///srv/git/repo.git"},
		{url: "file:///srv/git/repo.git/", protocol: "file", safe: "file:///srv/git/repo.git"},
		{url: "http://127.0.0.1:8080/repo.git", allowHTTP: true, protocol: "http", safe: "http://127.0.0.1:8080/repo.git"},
		{url: "http://127.0.0.1:8080/repo.git"},
		{url: "HTTP://example.com/repo.git"},
		{url: "ext::sh -c touch% /tmp/pwned"},
		{url: "ext::ssh -oProxyCommand=evil host"},
		{url: "fd::17"},
		{url: "-oProxyCommand=evil"},
		{url: "--upload-pack=touch /tmp/x"},
		{url: "ssh://-oProxyCommand=evil/repo"},
		{url: "ssh://host/-oProxyCommand=evil"},
		{url: "git@-oProxyCommand=evil:repo"},
		{url: "git@host:-repo"},
		{url: "ssh://git:" + testPassword + "@host/repo"},
		{url: "git://github.com/org/repo.git"},
		{url: "ftp://example.com/repo.git"},
		{url: "/srv/git/repo.git"},
		{url: "./repo"},
		{url: "file://host/srv/repo.git"},
		{url: "file://" + testPassword + "@/srv/repo.git"},
		{url: "file:///srv/../etc/repo.git"},
		{url: "file:relative/repo"},
		{url: "https://"},
		{url: "https://example.com/repo.git?ref=x"},
		{url: "https://example.com/repo.git#frag"},
		{url: "https://example.com/repo .git"},
		{url: "https://example.com/repo\n.git"},
		{url: ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			r, err := parseRemote(tc.url, tc.allowHTTP)
			if tc.protocol == "" {
				g.Expect(err).To(MatchError(ErrUnsupportedURL))
				g.Expect(Reason(err)).To(Equal("UnsupportedURL"))
				g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.endpoint.Protocol).To(Equal(tc.protocol))
			g.Expect(r.safeURL).To(Equal(tc.safe))
			g.Expect(r.endpoint.Password).To(BeEmpty(), "credentials never travel in the endpoint")
		})
	}
}

func TestRedactRaw(t *testing.T) {
	g := NewWithT(t)
	g.Expect(redactRaw("https://u:" + testPassword + "@h/p")).To(Equal("https://h/p"))
	g.Expect(redactRaw("weird://u:" + testPassword + "@h:x:y/p@q")).To(Equal("weird://h:x:y/p@q"))
	g.Expect(redactRaw("u:" + testPassword + "@h:p")).To(Equal("h:p"))
	g.Expect(redactRaw("/plain/path")).To(Equal("/plain/path"))
}

func testSSHKey(t *testing.T) ([]byte, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), signer
}

func TestNewValidatesAuth(t *testing.T) {
	key, signer := testSSHKey(t)
	knownHosts := []byte("github.com " + string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	for name, tc := range map[string]struct {
		url  string
		auth *Auth
		ok   bool
	}{
		"https anonymous":          {url: "https://h/r.git", ok: true},
		"https basic":              {url: "https://h/r.git", auth: &Auth{Username: "u", Password: testPassword}, ok: true},
		"https token":              {url: "https://h/r.git", auth: &Auth{Password: testPassword}, ok: true},
		"https with ssh key":       {url: "https://h/r.git", auth: &Auth{SSHPrivateKey: key, KnownHosts: knownHosts}},
		"basic and ssh":            {url: "ssh://git@h/r.git", auth: &Auth{Password: testPassword, SSHPrivateKey: key, KnownHosts: knownHosts}},
		"URL and Auth credentials": {url: "https://u:" + testPassword + "@h/r.git", auth: &Auth{Password: "other"}},
		"ssh":                      {url: "git@github.com:org/r.git", auth: &Auth{SSHPrivateKey: key, KnownHosts: knownHosts}, ok: true},
		"ssh without auth":         {url: "git@github.com:org/r.git"},
		"ssh without known_hosts":  {url: "git@github.com:org/r.git", auth: &Auth{SSHPrivateKey: key}},
		"ssh with basic auth":      {url: "ssh://git@h/r.git", auth: &Auth{Username: "u", Password: testPassword}},
		"ssh with a bad key":       {url: "ssh://git@h/r.git", auth: &Auth{SSHPrivateKey: []byte(testPassword), KnownHosts: knownHosts}},
		"ssh with bad known_hosts": {url: "ssh://git@h/r.git", auth: &Auth{SSHPrivateKey: key, KnownHosts: []byte("h ssh-ed25519 !!!" + testPassword)}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(Options{URL: tc.url, Auth: tc.auth, CacheDir: t.TempDir()})
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ErrAuth))
			g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
			g.Expect(err.Error()).NotTo(ContainSubstring("PRIVATE KEY"))
		})
	}
}

func TestReason(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Reason(nil)).To(BeEmpty())
	for err, want := range map[error]string{
		ErrUnsafePath:         "UnsafePath",
		ErrTooLarge:           "SourceTooLarge",
		ErrRefNotFound:        "RefNotFound",
		ErrUnknownRevision:    "UnknownRevision",
		ErrUnsupportedURL:     "UnsupportedURL",
		ErrUnsupportedContent: "UnsupportedContent",
		ErrAuth:               "AuthFailed",
		ErrTimeout:            "Timeout",
		errors.New("boom"):    "FetchFailed",
	} {
		g.Expect(Reason(fmt.Errorf("failed to x: %w", err))).To(Equal(want))
	}
}

func TestScrubHidesSecretsAndBoundsText(t *testing.T) {
	g := NewWithT(t)
	cause := fmt.Errorf("remote said %s %w", testPassword+strings.Repeat("x", 2000), ErrAuth)
	err := scrub(cause, []string{testPassword, ""})
	g.Expect(err.Error()).NotTo(ContainSubstring(testPassword))
	g.Expect(len(err.Error())).To(BeNumerically("<=", maxCauseLen+3))
	g.Expect(err).To(MatchError(ErrAuth))
}

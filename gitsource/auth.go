package gitsource

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
)

// tokenUsername is sent with a token given as Auth.Password alone; GitHub,
// GitLab and Gitea accept any non-empty user name with a token.
const tokenUsername = "git"

// credentials are the auth method of a Source and the secrets to scrub from
// its errors.
type credentials struct {
	method  transport.AuthMethod // nil: anonymous
	secrets []string
}

// newCredentials checks that a and the URL's userinfo agree with r's scheme
// and builds the go-git auth method.
func newCredentials(a *Auth, r *remote) (credentials, error) {
	if a == nil {
		a = &Auth{}
	}
	if r.password != "" || (r.user != "" && r.endpoint.Protocol != "ssh") {
		if a.Username != "" || a.Password != "" || len(a.SSHPrivateKey) > 0 {
			return credentials{}, authConfigError(r, "credentials both in the URL and in Auth")
		}
		a = &Auth{Username: r.user, Password: r.password}
	}
	basic := a.Username != "" || a.Password != ""
	if basic && len(a.SSHPrivateKey) > 0 {
		return credentials{}, authConfigError(r, "both basic and ssh credentials")
	}
	switch r.endpoint.Protocol {
	case "ssh":
		return sshCredentials(a, r)
	case "http", "https":
		return basicCredentials(a, r)
	}
	return credentials{}, nil // file: nothing to authenticate
}

func basicCredentials(a *Auth, r *remote) (credentials, error) {
	if len(a.SSHPrivateKey) > 0 {
		return credentials{}, authConfigError(r, "ssh credentials for an http URL")
	}
	if a.Username == "" && a.Password == "" {
		return credentials{}, nil
	}
	user := a.Username
	if user == "" {
		user = tokenUsername
	}
	secrets := []string{a.Password}
	if a.Password == "" {
		secrets = []string{a.Username} // a token given as the user name
	}
	return credentials{
		method:  &githttp.BasicAuth{Username: user, Password: a.Password},
		secrets: secrets,
	}, nil
}

func sshCredentials(a *Auth, r *remote) (credentials, error) {
	if a.Username != "" || a.Password != "" {
		return credentials{}, authConfigError(r, "basic credentials for an ssh URL")
	}
	if len(a.SSHPrivateKey) == 0 {
		return credentials{}, authConfigError(r, "ssh needs Auth.SSHPrivateKey")
	}
	if len(a.KnownHosts) == 0 {
		return credentials{}, authConfigError(r, "ssh needs Auth.KnownHosts")
	}
	signer, err := parseSigner(a)
	if err != nil {
		return credentials{}, authConfigError(r, err.Error())
	}
	hosts, err := parseKnownHosts(a.KnownHosts)
	if err != nil {
		return credentials{}, authConfigError(r, err.Error())
	}
	user := r.user
	if user == "" {
		user = "git"
	}
	m := &sshAuth{user: user, signer: signer, hosts: hosts, addr: hostWithPort(r.endpoint)}
	return credentials{method: m, secrets: []string{a.SSHPassphrase}}, nil
}

func parseSigner(a *Auth) (ssh.Signer, error) {
	var (
		s   ssh.Signer
		err error
	)
	if a.SSHPassphrase != "" {
		s, err = ssh.ParsePrivateKeyWithPassphrase(a.SSHPrivateKey, []byte(a.SSHPassphrase))
	} else {
		s, err = ssh.ParsePrivateKey(a.SSHPrivateKey)
	}
	if err != nil {
		// The parser's messages never quote the key, but keep only its class.
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, errors.New("ssh private key needs a passphrase")
		}
		return nil, errors.New("ssh private key cannot be parsed or decrypted")
	}
	return s, nil
}

// parseKnownHosts loads known_hosts bytes through skeema/knownhosts, which
// also tells which host key algorithms to negotiate. It reads files only, so
// the bytes go through a private temporary file removed at once.
func parseKnownHosts(data []byte) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "cairn-known-hosts-*")
	if err != nil {
		return nil, fmt.Errorf("failed to write known_hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("failed to write known_hosts: %w", werr)
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		return nil, errors.New("known_hosts cannot be parsed")
	}
	return db, nil
}

func hostWithPort(ep *transport.Endpoint) string {
	port := ep.Port
	if port <= 0 {
		port = 22
	}
	return net.JoinHostPort(trimBrackets(ep.Host), strconv.Itoa(port))
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

func authConfigError(r *remote, why string) error {
	return fmt.Errorf("failed to configure auth for %s: %w: %s", r.safeURL, ErrAuth, why)
}

// sshAuth is go-git's ssh.AuthMethod with a fixed key and host key database;
// it never falls back to an agent or the user's known_hosts.
type sshAuth struct {
	user   string
	signer ssh.Signer
	hosts  *knownhosts.HostKeyDB
	addr   string
}

func (a *sshAuth) Name() string   { return "ssh-public-keys" }
func (a *sshAuth) String() string { return "user: " + a.user + ", name: " + a.Name() }

// ClientConfig implements go-git's ssh.AuthMethod.
func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{
		User:              a.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(a.signer)},
		HostKeyCallback:   a.hosts.HostKeyCallback(),
		HostKeyAlgorithms: a.hosts.HostKeyAlgorithms(a.addr),
	}, nil
}

package sign

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Secret types and keys that carry registry credentials.
const (
	SecretTypeBasicAuth        = "kubernetes.io/basic-auth"
	SecretTypeDockerConfigJSON = "kubernetes.io/dockerconfigjson"
	SecretTypeDockerConfig     = "kubernetes.io/dockercfg"
	SecretKeyUsername          = "username"
	SecretKeyPassword          = "password"
	SecretKeyDockerConfigJSON  = ".dockerconfigjson"
	SecretKeyDockerConfig      = ".dockercfg"
)

// Credentials authenticate to one registry host. Its String, GoString and
// MarshalJSON never show the password.
type Credentials struct {
	Username string
	Password string
}

// String shows the username only.
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{Username: %q, Password: <redacted>}", c.Username)
}

// GoString is String, so %#v does not show the password either.
func (c Credentials) GoString() string { return c.String() }

// MarshalJSON shows the username only.
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"username": c.Username, "password": "<redacted>"})
}

// CredentialsFromSecret reads the credentials for host from the data of a
// Kubernetes Secret of the given type. Keys username and password make basic auth
// whatever the type (kubernetes.io/basic-auth and Opaque both occur); a
// .dockerconfigjson (or legacy .dockercfg) key is a docker config whose entry for
// host is used. Empty values count as absent. Anything else is an [*Error] with
// reason UnsupportedSecret that names the keys found, never their values: there is
// no fallback to anonymous access.
func CredentialsFromSecret(host, secretType string, data map[string][]byte) (*Credentials, error) {
	user, pass := string(data[SecretKeyUsername]), string(data[SecretKeyPassword])
	switch {
	case user != "" && pass != "":
		return &Credentials{Username: user, Password: pass}, nil
	case len(data[SecretKeyDockerConfigJSON]) > 0:
		return DockerConfigCredentials(data[SecretKeyDockerConfigJSON], host)
	case len(data[SecretKeyDockerConfig]) > 0:
		return legacyDockerConfigCredentials(data[SecretKeyDockerConfig], host)
	}
	return nil, unsupported(host, fmt.Errorf("secret of type %q has %s; want non-empty %s and %s, or %s",
		secretType, describeKeys(data), SecretKeyUsername, SecretKeyPassword, SecretKeyDockerConfigJSON))
}

// describeKeys names the keys of a Secret, marking the empty ones. It never looks
// at the values beyond their length.
func describeKeys(data map[string][]byte) string {
	if len(data) == 0 {
		return "no keys"
	}
	keys := make([]string, 0, len(data))
	for k, v := range data {
		if len(v) == 0 {
			k += " (empty)"
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "keys [" + strings.Join(keys, ", ") + "]"
}

func unsupported(host string, err error) *Error {
	return newError(ReasonUnsupportedSecret, "read registry credentials for", host, err)
}

// dockerConfig is the part of ~/.docker/config.json that names credentials.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredHelpers map[string]string     `json:"credHelpers"`
	CredsStore  string                `json:"credsStore"`
}

type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// DockerConfigCredentials reads the credentials for host from a docker config
// (the content of a config.json or a .dockerconfigjson key). An auths entry keyed
// by host, https://host or http://host (a path after the host is ignored) with
// username and password, or with auth ("user:pass" in base64), is used. A config
// without such an entry, an identity token, a credential helper (which would have
// to be executed) and malformed JSON are [*Error]s with reason UnsupportedSecret.
func DockerConfigCredentials(configJSON []byte, host string) (*Credentials, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return nil, unsupported(host, fmt.Errorf("docker config is not valid JSON (%d bytes)", len(configJSON)))
	}
	return credentialsFromAuths(cfg, host)
}

// legacyDockerConfigCredentials reads a .dockercfg: the auths map without its wrapper.
func legacyDockerConfigCredentials(configJSON []byte, host string) (*Credentials, error) {
	var auths map[string]dockerAuth
	if err := json.Unmarshal(configJSON, &auths); err != nil {
		return nil, unsupported(host, fmt.Errorf("legacy docker config is not valid JSON (%d bytes)", len(configJSON)))
	}
	return credentialsFromAuths(dockerConfig{Auths: auths}, host)
}

func credentialsFromAuths(cfg dockerConfig, host string) (*Credentials, error) {
	key, entry, ok := findAuth(cfg.Auths, host)
	if !ok {
		return nil, unsupported(host, noEntryError(cfg, host))
	}
	if entry.IdentityToken != "" {
		return nil, unsupported(host, fmt.Errorf("docker config entry %q holds an identity token, which is not supported; use username and password", key))
	}
	user, pass := entry.Username, entry.Password
	if entry.Auth != "" && (user == "" || pass == "") {
		var err error
		if user, pass, err = decodeAuth(entry.Auth); err != nil {
			return nil, unsupported(host, fmt.Errorf("docker config entry %q: %w", key, err))
		}
	}
	if user == "" || pass == "" {
		return nil, unsupported(host, fmt.Errorf("docker config entry %q has no username and password nor auth", key))
	}
	return &Credentials{Username: user, Password: pass}, nil
}

// findAuth looks host up by the keys docker writes, then by any key that names
// the same host:port with a scheme or a path. Entries without any credential count
// as absent.
func findAuth(auths map[string]dockerAuth, host string) (string, dockerAuth, bool) {
	for _, key := range []string{host, "https://" + host, "http://" + host} {
		if a, ok := auths[key]; ok && !a.empty() {
			return key, a, true
		}
	}
	keys := make([]string, 0, len(auths))
	for k := range auths {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.EqualFold(authHost(k), host) && !auths[k].empty() {
			return k, auths[k], true
		}
	}
	return "", dockerAuth{}, false
}

func (a dockerAuth) empty() bool {
	return a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == ""
}

// authHost strips the scheme and path from a docker config key.
func authHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	return host
}

func decodeAuth(auth string) (user, pass string, err error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth))
	if err != nil {
		return "", "", fmt.Errorf("auth is not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("auth is not of the form user:password")
	}
	return user, pass, nil
}

func noEntryError(cfg dockerConfig, host string) error {
	if helper, ok := cfg.CredHelpers[host]; ok {
		return fmt.Errorf("docker config names credential helper %q for %s, which cairn does not run; put username and password in auths", helper, host)
	}
	hosts := make([]string, 0, len(cfg.Auths))
	for k := range cfg.Auths {
		hosts = append(hosts, k)
	}
	slices.Sort(hosts)
	msg := fmt.Sprintf("docker config has no auths entry with credentials for %s (entries: [%s])", host, strings.Join(hosts, ", "))
	if cfg.CredsStore != "" {
		msg += fmt.Sprintf("; credential store %q is not used", cfg.CredsStore)
	}
	return errors.New(msg)
}

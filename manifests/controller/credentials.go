package controller

import (
	"path"

	corev1 "k8s.io/api/core/v1"
)

// Secrets holding the credential files, in cairn's namespace.
const (
	GitSecret     = "cairn-git-credentials"
	ForgeSecret   = "cairn-forge-token"
	WebhookSecret = "cairn-webhook-secret"
)

// credentialFile is one credential file: the flag naming it, the Secret and key it is
// kept under, and the directory the Secret is mounted at.
type credentialFile struct {
	flag, secret, dir, key string
	data                   []byte
}

func (f credentialFile) path() string { return path.Join(credentialsDir, f.dir, f.key) }

// credentialFiles are the credential files given, in a fixed order.
func credentialFiles(c Credentials) []credentialFile {
	all := []credentialFile{
		{"--git-password-file", GitSecret, "git", "password", c.GitPassword},
		{"--ssh-key", GitSecret, "git", "identity", c.SSHKey},
		{"--known-hosts", GitSecret, "git", "known_hosts", c.KnownHosts},
		{"--forge-token-file", ForgeSecret, "forge", "token", c.ForgeToken},
		{"--webhook-secret-file", WebhookSecret, "webhook", "secret", c.WebhookSecret},
	}
	var out []credentialFile
	for _, f := range all {
		if len(f.data) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// secretMount is one Secret of credential files and where it is mounted.
type secretMount struct {
	secret, dir string
	data        map[string][]byte
}

func credentialSecrets(c Credentials) []secretMount {
	var out []secretMount
	for _, f := range credentialFiles(c) {
		if n := len(out); n > 0 && out[n-1].secret == f.secret {
			out[n-1].data[f.key] = f.data
			continue
		}
		out = append(out, secretMount{secret: f.secret, dir: f.dir, data: map[string][]byte{f.key: f.data}})
	}
	return out
}

// Secrets are the Secrets of the credential files given: `cairn install` applies them
// and `cairn uninstall` keeps them; their data is never printed.
func Secrets(o Options) []*corev1.Secret {
	var out []*corev1.Secret
	for _, s := range credentialSecrets(o.Credentials) {
		out = append(out, &corev1.Secret{TypeMeta: typeMeta("v1", "Secret"), ObjectMeta: meta(o.Namespace, s.secret),
			Type: corev1.SecretTypeOpaque, Data: s.data})
	}
	return out
}

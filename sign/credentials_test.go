package sign

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const secretPassword = "s3cr3t-Pa55w0rd"

func dockerConfigJSON(entries map[string]map[string]string) []byte {
	raw, _ := json.Marshal(map[string]any{"auths": entries})
	return raw
}

func TestCredentialsFromSecret(t *testing.T) {
	const host = "registry.example.com:5000"
	auth := base64.StdEncoding.EncodeToString([]byte("robot:" + secretPassword))
	tests := []struct {
		name       string
		secretType string
		data       map[string][]byte
		wantUser   string
		wantReason string
		wantInMsg  string
	}{
		{name: "basic-auth Secret", secretType: SecretTypeBasicAuth,
			data: map[string][]byte{"username": []byte("robot"), "password": []byte(secretPassword)}, wantUser: "robot"},
		{name: "Opaque with username and password", secretType: "Opaque",
			data: map[string][]byte{"username": []byte("robot"), "password": []byte(secretPassword), "other": []byte("x")}, wantUser: "robot"},
		{name: "dockerconfigjson matched on host", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				"other.example.com": {"username": "wrong", "password": "wrong"},
				host:                {"username": "robot", "password": secretPassword}})}, wantUser: "robot"},
		{name: "dockerconfigjson keyed by https://host", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				"https://" + host: {"username": "robot", "password": secretPassword}})}, wantUser: "robot"},
		{name: "dockerconfigjson keyed by http://host/v1/", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				"http://" + host + "/v1/": {"username": "robot", "password": secretPassword}})}, wantUser: "robot"},
		{name: "dockerconfigjson with auth field", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				host: {"auth": auth}})}, wantUser: "robot"},
		{name: "legacy dockercfg", secretType: SecretTypeDockerConfig,
			data: map[string][]byte{".dockercfg": []byte(`{"` + host + `":{"auth":"` + auth + `"}}`)}, wantUser: "robot"},
		{name: "dockerconfigjson without the host", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				"other.example.com": {"username": "robot", "password": secretPassword}})},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "no auths entry with credentials for " + host},
		{name: "dockerconfigjson with a port of another registry", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				"registry.example.com": {"username": "robot", "password": secretPassword}})},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "entries: [registry.example.com]"},
		{name: "dockerconfigjson identity token", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				host: {"identitytoken": secretPassword}})},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "identity token"},
		{name: "dockerconfigjson credential helper", secretType: SecretTypeDockerConfigJSON,
			data:       map[string][]byte{".dockerconfigjson": []byte(`{"credHelpers":{"` + host + `":"ecr-login"}}`)},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "credential helper"},
		{name: "dockerconfigjson auth without colon", secretType: SecretTypeDockerConfigJSON,
			data: map[string][]byte{".dockerconfigjson": dockerConfigJSON(map[string]map[string]string{
				host: {"auth": base64.StdEncoding.EncodeToString([]byte(secretPassword))}})},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "user:password"},
		{name: "malformed dockerconfigjson", secretType: SecretTypeDockerConfigJSON,
			data:       map[string][]byte{".dockerconfigjson": []byte(`{"auths": {"` + host + `": "` + secretPassword)},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "not valid JSON"},
		{name: "empty password counts as absent", secretType: SecretTypeBasicAuth,
			data:       map[string][]byte{"username": []byte("robot"), "password": {}},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "keys [password (empty), username]"},
		{name: "empty dockerconfigjson counts as absent", secretType: SecretTypeDockerConfigJSON,
			data:       map[string][]byte{".dockerconfigjson": {}},
			wantReason: ReasonUnsupportedSecret, wantInMsg: ".dockerconfigjson (empty)"},
		{name: "unknown shape", secretType: "Opaque",
			data:       map[string][]byte{"token": []byte(secretPassword), "user": []byte("robot")},
			wantReason: ReasonUnsupportedSecret, wantInMsg: "keys [token, user]"},
		{name: "no data", secretType: "Opaque", data: nil,
			wantReason: ReasonUnsupportedSecret, wantInMsg: "no keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			creds, err := CredentialsFromSecret(host, tt.secretType, tt.data)
			if tt.wantReason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(creds.Username).To(Equal(tt.wantUser))
				g.Expect(creds.Password).To(Equal(secretPassword))
				return
			}
			g.Expect(creds).To(BeNil())
			g.Expect(Reason(err)).To(Equal(tt.wantReason))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantInMsg))
			g.Expect(err.Error()).To(ContainSubstring(host))
			g.Expect(err.Error()).NotTo(ContainSubstring(secretPassword))
			g.Expect(fmt.Sprintf("%+v %#v", err, err)).NotTo(ContainSubstring(secretPassword))
		})
	}
}

func TestCredentialsNeverPrintThePassword(t *testing.T) {
	g := NewWithT(t)
	creds := &Credentials{Username: "robot", Password: secretPassword}
	ep := Endpoint{Host: "registry.example.com", Credentials: creds}
	raw, err := json.Marshal(ep)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range []string{
		creds.String(), creds.GoString(),
		fmt.Sprintf("%v", creds), fmt.Sprintf("%+v", creds), fmt.Sprintf("%#v", creds), fmt.Sprintf("%s", *creds),
		fmt.Sprintf("%v", *creds), fmt.Sprintf("%+v", *creds), fmt.Sprintf("%#v", *creds), fmt.Sprintf("%x", *creds),
		fmt.Sprintf("%v", ep), fmt.Sprintf("%+v", ep), fmt.Sprintf("%#v", ep), string(raw),
	} {
		g.Expect(s).NotTo(ContainSubstring(secretPassword))
		g.Expect(strings.Contains(s, "robot") || strings.HasPrefix(s, "43")).To(BeTrue(), s) // %x is hex of the redacted text
	}
}

func TestDockerConfigCredentials(t *testing.T) {
	g := NewWithT(t)
	cfg := dockerConfigJSON(map[string]map[string]string{"127.0.0.1:5000": {"username": "robot", "password": secretPassword}})
	creds, err := DockerConfigCredentials(cfg, "127.0.0.1:5000")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*creds).To(Equal(Credentials{Username: "robot", Password: secretPassword}))

	_, err = DockerConfigCredentials(cfg, "127.0.0.1:5001")
	g.Expect(Reason(err)).To(Equal(ReasonUnsupportedSecret))
	g.Expect(err.Error()).NotTo(ContainSubstring(secretPassword))
}

// FuzzDockerConfigCredentials: the parser never panics, rejects only with
// UnsupportedSecret and returns complete credentials otherwise.
func FuzzDockerConfigCredentials(f *testing.F) {
	f.Add([]byte(`{"auths":{"h":{"auth":"cm9ib3Q6czNjcjN0LVBhNTV3MHJk"}}}`), "h")
	f.Add([]byte(`{"auths":{"https://h/v1/":{"username":"u","password":"s3cr3t-Pa55w0rd"}}}`), "h")
	f.Add([]byte(`{"credHelpers":{"h":"x"}}`), "h")
	f.Fuzz(func(t *testing.T, cfg []byte, host string) {
		creds, err := DockerConfigCredentials(cfg, host)
		if err != nil {
			if Reason(err) != ReasonUnsupportedSecret {
				t.Fatalf("reason %q, want UnsupportedSecret", Reason(err))
			}
			return
		}
		if creds.Username == "" || creds.Password == "" {
			t.Fatalf("credentials without username or password: %v", creds)
		}
	})
}

// FuzzDockerConfigSecrets: whatever shape an entry has, an error never shows its
// password, auth or identity token.
func FuzzDockerConfigSecrets(f *testing.F) {
	f.Add("h:5000", "h:5000", "robot", secretPassword, "", "")
	f.Add("h", "https://h", "", "", "cm9ib3Q6czNjcjN0LVBhNTV3MHJk", "")
	f.Add("h", "h", "robot", "", "", secretPassword)
	f.Add("h", "h", "robot", "", "bm90LWEtcGFpcg==", "")
	f.Fuzz(func(t *testing.T, host, key, user, pass, auth, token string) {
		cfg := dockerConfigJSON(map[string]map[string]string{key: {
			"username": user, "password": pass, "auth": auth, "identitytoken": token}})
		_, err := DockerConfigCredentials(cfg, host)
		if err == nil {
			return
		}
		decoded, _ := base64.StdEncoding.DecodeString(auth)
		for _, secret := range []string{pass, auth, token, string(decoded)} {
			if len(secret) < 8 || strings.Contains(host+key+user, secret) {
				continue // too short to tell apart, or also a non-secret field
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error shows a secret: %v", err)
			}
		}
	})
}

package sign_test

import (
	"fmt"

	"cairn.dev/cairn/sign"
)

// A Secret with username and password keys is basic auth whatever its type;
// printing the credentials never shows the password.
func ExampleCredentialsFromSecret() {
	creds, err := sign.CredentialsFromSecret("registry.example.com", "Opaque", map[string][]byte{
		"username": []byte("robot"),
		"password": []byte("hunter2"),
	})
	fmt.Println(creds, err)

	_, err = sign.CredentialsFromSecret("registry.example.com", "Opaque", map[string][]byte{
		"token": []byte("hunter2"),
	})
	fmt.Println(sign.Reason(err))
	fmt.Println(err)
	// Output:
	// Credentials{Username: "robot", Password: <redacted>} <nil>
	// UnsupportedSecret
	// failed to read registry credentials for registry.example.com (UnsupportedSecret): secret of type "Opaque" has keys [token]; want non-empty username and password, or .dockerconfigjson
}

// Signatures live in the same repository, under a tag derived from the digest.
func ExampleSignatureTag() {
	fmt.Println(sign.SignatureTag("sha256:6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b"))
	// Output:
	// sha256-6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b.sig
}

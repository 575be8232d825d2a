package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

// TestImageRejects: bad flags, binaries and keys fail before anything is pushed,
// with an error naming what is wrong. The registry address is unreachable, so a
// push would fail differently.
func TestImageRejects(t *testing.T) {
	keyFile, _ := testKeys(t)
	binary := buildTestBinary(t, "hi")
	otherArch := "arm64"
	if runtime.GOARCH == "arm64" {
		otherArch = "amd64"
	}
	notELF := filepath.Join(t.TempDir(), "script")
	write(t, notELF, "#!/bin/sh\necho hi\n")
	const image = "127.0.0.1:1/cairn/cairn:x"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
		// unset names a variable removed from the environment.
		unset string
	}{
		{"no binary", []string{"-image", image}, nil, "-binary is required", ""},
		{"no image", []string{"-binary", binary}, nil, "-image is required", ""},
		{"image without a tag", []string{"-binary", binary, "-image", "127.0.0.1:1/cairn/cairn"}, nil, "is not HOST[:PORT]/REPOSITORY:TAG", ""},
		{"image by digest", []string{"-binary", binary, "-image", "127.0.0.1:1/cairn/cairn@sha256:" + zeros64}, nil, "is not HOST[:PORT]/REPOSITORY:TAG", ""},
		{"not an executable", []string{"-binary", notELF, "-image", image}, nil, "as a linux executable", ""},
		{"dynamically linked", []string{"-binary", dynamicBinary(t, binary), "-image", image}, nil, "dynamically linked: build it with CGO_ENABLED=0", ""},
		{"other architecture", []string{"-binary", binary, "-image", image, "-arch", otherArch}, nil, "not for -arch " + otherArch, ""},
		{"unknown architecture", []string{"-binary", binary, "-image", image, "-arch", "mips"}, nil, `-arch "mips" is not one of`, ""},
		{"bad SOURCE_DATE_EPOCH", []string{"-binary", binary, "-image", image}, map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, "SOURCE_DATE_EPOCH", ""},
		{"no CA bundle", []string{"-binary", binary, "-image", image, "-ca-bundle", "/nonexistent/ca.crt"}, nil, "failed to read the CA bundle", ""},
		{"no key file", []string{"-binary", binary, "-image", image, "-sign-key", "/nonexistent/cosign.key"}, nil, "failed to read the signing key", ""},
		{"wrong key password", []string{"-binary", binary, "-image", image, "-sign-key", keyFile}, map[string]string{"COSIGN_PASSWORD": "wrong"}, "cosign private key", ""},
		{"no key password", []string{"-binary", binary, "-image", image, "-sign-key", keyFile}, nil, "set CAIRN_PASSWORD or COSIGN_PASSWORD", "COSIGN_PASSWORD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.unset != "" {
				t.Setenv(tt.unset, "")
				os.Unsetenv(tt.unset)
			}
			out, _, err := runImage(t, tt.args...)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(out).To(BeEmpty())
		})
	}
}

const zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"

// dynamicBinary is a dynamically linked executable of the machine (a shell), or
// "" when there is none.
// dynamicBinary is a copy of the static binary whose first program header is made
// PT_INTERP, as a dynamically linked executable has: the same on every machine.
func dynamicBinary(t *testing.T, static string) string {
	t.Helper()
	b, err := os.ReadFile(static)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(static)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 {
		t.Fatalf("%s is not a 64-bit ELF", static)
	}
	phoff := f.ByteOrder.Uint64(b[0x20:]) // e_phoff; p_type is the first word of a header
	f.ByteOrder.PutUint32(b[phoff:], uint32(elf.PT_INTERP))
	out := filepath.Join(t.TempDir(), "dynamic")
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

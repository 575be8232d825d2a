package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"time"
)

// Paths and the user of the image.
const (
	binaryPath   = "/cairn"
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	nonrootID    = 65532
	passwd       = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group        = "root:x:0:\nnonroot:x:65532:\n"
)

// elfMachines maps the GOARCH values an image can be built for to their ELF machine.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// entry is one file or directory of the layer.
type entry struct {
	name     string // relative, directories end in "/"
	mode     int64
	uid, gid int
	data     []byte
}

// layerEntries lists the whole file system of the image, parents first.
func layerEntries(binary, caBundle []byte) []entry {
	return []entry{
		{name: binaryPath[1:], mode: 0o755, data: binary},
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caBundlePath[1:], mode: 0o644, data: caBundle},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonrootID, gid: nonrootID},
		{name: "tmp/", mode: 0o1777},
	}
}

// layerTar writes entries as a tar stream whose every header is fixed: the same
// entries and time give the same bytes.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("failed to write %s into the layer: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("failed to write %s into the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("failed to close the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// readStaticBinary reads a statically linked linux ELF binary built for arch: the
// image has no dynamic loader nor libc to run anything else.
func readStaticBinary(path, arch string) ([]byte, error) {
	want, ok := elfMachines[arch]
	if !ok {
		return nil, fmt.Errorf("-arch %q is not one of amd64, arm64, arm, ppc64le, s390x, riscv64", arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the binary %s as a linux executable: %w", path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return nil, fmt.Errorf("the binary %s is built for %s, not for -arch %s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("the binary %s is dynamically linked: build it with CGO_ENABLED=0", path)
		}
	}
	return os.ReadFile(path)
}

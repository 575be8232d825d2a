package gitsource

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
)

// sshGitServer is a loopback ssh server that runs `git upload-pack` (the git
// CLI, tests only) for the repositories of one directory.
type sshGitServer struct {
	addr    string
	hostKey ssh.PublicKey
	root    string
	config  *ssh.ServerConfig
}

func newSSHGitServer(t *testing.T, root string, authorized ssh.PublicKey) *sshGitServer {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git CLI not available (the CI installs it)")
	}
	_, hostSigner := testSSHKey(t)
	config := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), authorized.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unauthorized key")
	}}
	config.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &sshGitServer{addr: l.Addr().String(), hostKey: hostSigner.PublicKey(), root: root, config: config}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *sshGitServer) knownHosts(key ssh.PublicKey) []byte {
	return []byte(knownhosts.Line([]string{s.addr}, key) + "\n")
}

func (s *sshGitServer) serve(c net.Conn) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(ch, creqs)
	}
}

func (s *sshGitServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		var exe struct{ Command string }
		if req.Type != "exec" || ssh.Unmarshal(req.Payload, &exe) != nil {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		name, arg, _ := strings.Cut(exe.Command, " ")
		status := uint32(1)
		if name == "git-upload-pack" {
			cmd := exec.Command("git", "upload-pack", filepath.Join(s.root, strings.Trim(arg, "'")))
			cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
			cmd.WaitDelay = time.Second
			if cmd.Run() == nil {
				status = 0
			}
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

func TestSSHFetch(t *testing.T) {
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commit(map[string]string{"a.yaml": "a\n"})
	clientKey, clientSigner := testSSHKey(t)
	srv := newSSHGitServer(t, filepath.Dir(repo.dir), clientSigner.PublicKey())
	url := "ssh://git@" + srv.addr + "/repo.git"
	newSource := func(t *testing.T, key []byte, knownHosts []byte) *Source {
		s, err := New(Options{URL: url, CacheDir: t.TempDir(), Timeout: 10 * time.Second,
			Auth: &Auth{SSHPrivateKey: key, KnownHosts: knownHosts}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("known host and authorized key", func(t *testing.T) {
		g := NewWithT(t)
		s := newSource(t, clientKey, srv.knownHosts(srv.hostKey))
		head, err := s.Head(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(head).To(Equal(sha))
		g.Expect(s.Fetch(ctx, sha)).To(Succeed())
		tree, err := s.Tree(ctx, sha, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tree.Files()).To(Equal([]string{"a.yaml"}))
	})
	t.Run("host key mismatch", func(t *testing.T) {
		g := NewWithT(t)
		_, impostor := testSSHKey(t)
		s := newSource(t, clientKey, srv.knownHosts(impostor.PublicKey()))
		_, err := s.Head(ctx)
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(err.Error()).To(ContainSubstring("ssh://" + srv.addr + "/repo.git"))
	})
	t.Run("unknown host", func(t *testing.T) {
		g := NewWithT(t)
		other := []byte(knownhosts.Line([]string{"example.com"}, srv.hostKey) + "\n")
		s := newSource(t, clientKey, other)
		_, err := s.Head(ctx)
		g.Expect(err).To(MatchError(ErrAuth))
	})
	t.Run("unauthorized client key", func(t *testing.T) {
		g := NewWithT(t)
		otherKey, _ := testSSHKey(t)
		s := newSource(t, otherKey, srv.knownHosts(srv.hostKey))
		err := s.Fetch(ctx, sha)
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(Reason(err)).To(Equal("AuthFailed"))
	})
}

func TestSSHTimeoutOnHangingServer(t *testing.T) {
	g := NewWithT(t)
	addr := hangingListener(t)
	key, signer := testSSHKey(t)
	const timeout = 300 * time.Millisecond
	s, err := New(Options{URL: "ssh://git@" + addr + "/repo.git", CacheDir: t.TempDir(), Timeout: timeout,
		Auth: &Auth{SSHPrivateKey: key, KnownHosts: []byte(knownhosts.Line([]string{addr}, signer.PublicKey()) + "\n")}})
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	_, err = s.Head(context.Background())
	g.Expect(time.Since(start)).To(BeNumerically("<", timeout+time.Second))
	g.Expect(err).To(MatchError(ErrTimeout))

	start = time.Now()
	err = s.Fetch(context.Background(), strings.Repeat("b", 40))
	g.Expect(time.Since(start)).To(BeNumerically("<", timeout+time.Second))
	g.Expect(err).To(MatchError(ErrTimeout))
}

// Command localforge starts the Gitea of test/forge detached, for the demo:
// a repository holding the files under examples/ and, optionally, a webhook
// to a `cairn sync --listen` started next to it.
//
//	go run ./test/localforge up   --dir .demo/gitea [--webhook-url URL --webhook-secret-file F] [--examples examples]
//	go run ./test/localforge down --dir .demo/gitea
//
// `up` reuses the Gitea running in the directory (and the repository in it;
// the webhook is replaced so that its secret is the current one) and writes
// DIR/env: GITEA_URL, GITEA_REPO, GITEA_REPO_URL, GITEA_TOKEN_FILE (the admin's
// API token, mode 0600), GITEA_USER and GITEA_PASSWORD (the web UI login).
// Exit codes: 0 success, 1 failure, 2 usage error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"cairn.dev/cairn/gitsource/forge"
	giteaharness "cairn.dev/cairn/test/forge"
)

const repoName = "platform"

// state is what up saves (DIR/state.json, 0600) to find Gitea again.
type state struct {
	Pid      int    `json:"pid"`
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Token    string `json:"token"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: localforge up|down --dir DIR [--webhook-url URL --webhook-secret-file F]")
		return 2
	}
	fs := flag.NewFlagSet("localforge "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".demo/gitea", "state directory of Gitea")
	hookURL := fs.String("webhook-url", "", "add a push and pull_request webhook to this URL")
	secretFile := fs.String("webhook-secret-file", "", "file holding the webhook's secret (required with --webhook-url)")
	examples := fs.String("examples", "examples", "directory whose files the new repository is made of")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if (*hookURL == "") != (*secretFile == "") {
		fmt.Fprintln(stderr, "localforge: --webhook-url and --webhook-secret-file go together")
		return 2
	}
	abs, err := filepath.Abs(*dir)
	if err == nil {
		switch args[0] {
		case "up":
			err = up(ctx, abs, *examples, *hookURL, *secretFile, stdout, stderr)
		case "down":
			err = down(abs, stdout)
		default:
			fmt.Fprintf(stderr, "unknown command %q: want up or down\n", args[0])
			return 2
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "localforge %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func up(ctx context.Context, dir, examples, hookURL, secretFile string, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g, how := reattach(ctx, dir), "reused"
	if g == nil {
		if err := stopDir(dir); err != nil {
			return err
		}
		// A fresh instance: what a previous one left is of no use (its
		// admin password and token are gone).
		for _, name := range []string{"gitea", "gitea.log", "state.json", "token", "env"} {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "localforge: starting gitea %s in %s (built on first use)\n", giteaharness.Version, dir)
		var err error
		if g, err = giteaharness.StartGitea(ctx, dir); err != nil {
			return err
		}
		how = "started"
		data, _ := json.Marshal(state{Pid: g.Pid(), URL: g.URL, User: g.AdminUser, Password: g.AdminPassword, Token: g.Token})
		if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600); err != nil {
			g.Stop()
			return err
		}
	}
	repo := forge.RepoRef{Owner: g.AdminUser, Name: repoName}
	repoURL := g.URL + "/" + repo.String() + ".git"
	if !g.RepoExists(ctx, repoName) {
		if _, err := g.CreateRepo(ctx, repoName); err != nil {
			return err
		}
		if err := pushDir(ctx, examples, repoURL, &githttp.BasicAuth{Username: g.AdminUser, Password: g.Token}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "localforge: pushed %s to %s\n", examples, repoURL)
	}
	if hookURL != "" {
		secret, err := os.ReadFile(secretFile)
		if err != nil {
			return err
		}
		if err := g.RemoveWebhooks(ctx, repo, hookURL); err != nil {
			return err
		}
		if err := g.AddWebhook(ctx, repo, hookURL, strings.TrimSpace(string(secret)), "push", "pull_request"); err != nil {
			return err
		}
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(g.Token+"\n"), 0o600); err != nil {
		return err
	}
	env := fmt.Sprintf("GITEA_URL=%s\nGITEA_REPO=%s\nGITEA_REPO_URL=%s\nGITEA_TOKEN_FILE=%s\nGITEA_USER=%s\nGITEA_PASSWORD=%s\n",
		g.URL, repo, repoURL, tokenFile, g.AdminUser, g.AdminPassword)
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gitea %s in %s\nurl:      %s (login %s)\nrepo:     %s\nenv file: %s\n",
		how, dir, g.URL, g.AdminUser, repoURL, filepath.Join(dir, "env"))
	if hookURL != "" {
		fmt.Fprintf(stdout, "webhook:  %s (push, pull_request)\n", hookURL)
	}
	return nil
}

// reattach returns the Gitea saved in dir when its process lives and its
// API answers, otherwise nil.
func reattach(ctx context.Context, dir string) *giteaharness.Gitea {
	s, err := readState(dir)
	if err != nil || !alive(s.Pid) {
		return nil
	}
	g, err := giteaharness.Reattach(ctx, s.URL, s.User, s.Password, s.Token)
	if err != nil {
		return nil
	}
	return g
}

func readState(dir string) (state, error) {
	var s state
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(data, &s)
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// pushDir commits every file under src to the repository's main branch and
// pushes it over HTTP.
func pushDir(ctx context.Context, src, url string, auth *githttp.BasicAuth) error {
	fs := memfs.New()
	r, err := git.CloneContext(ctx, memory.NewStorage(), fs, &git.CloneOptions{URL: url, Auth: auth})
	if err != nil {
		return fmt.Errorf("failed to clone %s: %w", url, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return err
	}
	err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := fs.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return err
		}
		f, err := fs.Create(rel)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		_, err = wt.Add(filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to copy %s: %w", src, err)
	}
	sig := &object.Signature{Name: "cairn demo", Email: "demo@example.invalid", When: time.Now()}
	if _, err := wt.Commit("platform: the cairn examples", &git.CommitOptions{Author: sig}); err != nil {
		return err
	}
	if err := r.PushContext(ctx, &git.PushOptions{Auth: auth}); err != nil {
		return fmt.Errorf("failed to push to %s: %w", url, err)
	}
	return nil
}

func down(dir string, stdout io.Writer) error {
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !alive(s.Pid)) {
		fmt.Fprintf(stdout, "no gitea running in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	if err := stopDir(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stopped gitea (pid %d) in %s\n", s.Pid, dir)
	return nil
}

// stopDir stops the process group of the saved pid: SIGTERM, then SIGKILL
// after ten seconds.
func stopDir(dir string) error {
	s, err := readState(dir)
	if err != nil || !alive(s.Pid) {
		return nil
	}
	if !isGitea(s.Pid) {
		return fmt.Errorf("pid %d saved in %s is not gitea; not stopping it", s.Pid, dir)
	}
	_ = syscall.Kill(-s.Pid, syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !alive(s.Pid) {
			return nil
		}
	}
	_ = syscall.Kill(-s.Pid, syscall.SIGKILL)
	return nil
}

// isGitea guards against a recycled pid.
func isGitea(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err != nil || strings.Contains(string(data), "gitea")
}

package giteaharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"cairn.dev/cairn/test/harness"
)

// Gitea is a running Gitea instance.
type Gitea struct {
	// URL is the server's root, http://127.0.0.1:PORT.
	URL string
	// AdminUser and AdminPassword are the admin account; Token is an API
	// token of that account with all scopes.
	AdminUser     string
	AdminPassword string
	Token         string
	// Started is how long StartGitea took from exec to a ready API (build
	// and user creation excluded).
	Started time.Duration

	work    string
	logPath string
	cmd     *exec.Cmd
	done    chan error
	http    *http.Client
}

// StartGitea runs Gitea in dir (created if needed; it holds the work path,
// SQLite database, repositories and log) and returns once its API answers
// and an admin token exists. Call Stop when done.
func StartGitea(ctx context.Context, dir string) (*Gitea, error) {
	bin, err := FindGitea(ctx)
	if err != nil {
		return nil, err
	}
	acct, err := runAccount()
	if err != nil {
		return nil, err
	}
	g := &Gitea{AdminUser: "cairn", AdminPassword: "cairn-" + randomHex(8), http: &http.Client{Timeout: 30 * time.Second}}
	if err := g.prepare(bin, dir, acct); err != nil {
		return nil, err
	}
	if err := g.run(ctx, acct, "migrate"); err != nil {
		return nil, err
	}
	if err := g.run(ctx, acct, "admin", "user", "create", "--admin", "--username", g.AdminUser,
		"--password", g.AdminPassword, "--email", "cairn@example.invalid", "--must-change-password=false"); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := g.start(acct); err != nil {
		return nil, err
	}
	if err := g.waitReady(ctx); err != nil {
		g.Stop()
		return nil, err
	}
	g.Started = time.Since(start)
	if err := g.createToken(ctx); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// prepare lays out the work path: the binary, options/ and templates/
// (hard-linked from the build cache when possible, so they stay root's and
// read-only to Gitea), and app.ini; only the directories Gitea writes are
// given to the account.
func (g *Gitea) prepare(bin, dir string, acct account) error {
	work := filepath.Join(dir, "gitea")
	for _, d := range []string{"custom/conf", "data", "repos", "log"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return fmt.Errorf("failed to create gitea's work path: %w", err)
		}
	}
	for _, name := range []string{"gitea", "options", "templates"} {
		if err := linkTree(filepath.Join(bin, name), filepath.Join(work, name)); err != nil {
			return fmt.Errorf("failed to copy %s into gitea's work path: %w", name, err)
		}
	}
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	g.work, g.logPath = work, filepath.Join(dir, "gitea.log")
	g.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := iniValues{User: acct.name, Work: work, Port: port, SecretKey: randomHex(16), InternalToken: randomHex(32)}
	if err := writeAppINI(g.config(), ini); err != nil {
		return fmt.Errorf("failed to write app.ini: %w", err)
	}
	if err := acct.chown(work, "custom", "custom/conf", "custom/conf/app.ini", "data", "repos", "log"); err != nil {
		return fmt.Errorf("failed to give gitea's work path to %s: %w", acct.name, err)
	}
	return acct.makeReachable(work)
}

func (g *Gitea) config() string { return filepath.Join(g.work, "custom", "conf", "app.ini") }

// command builds a gitea command run as acct, logging to g.logPath.
func (g *Gitea) command(ctx context.Context, acct account, args ...string) (*exec.Cmd, *os.File, error) {
	logFile, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(logFile, "\n=== gitea %s\n", strings.Join(args, " "))
	args = append(args, "--config", g.config(), "--work-path", g.work)
	cmd := exec.CommandContext(ctx, filepath.Join(g.work, "gitea"), args...)
	cmd.Dir = g.work
	cmd.Env = []string{"HOME=" + g.work, "USER=" + acct.name, "GITEA_WORK_DIR=" + g.work, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: acct.credential(), Setpgid: true}
	return cmd, logFile, nil
}

// run runs a gitea subcommand to completion.
func (g *Gitea) run(ctx context.Context, acct account, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd, logFile, err := g.command(ctx, acct, args...)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to run gitea %s: %w\n%s", args[0], err, g.LogTail(40))
	}
	return nil
}

// start runs gitea web in the background.
func (g *Gitea) start(acct account) error {
	cmd, logFile, err := g.command(context.Background(), acct, "web")
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("failed to start gitea web: %w", err)
	}
	g.cmd, g.done = cmd, make(chan error, 1)
	go func() {
		g.done <- cmd.Wait()
		logFile.Close()
	}()
	return nil
}

// waitReady polls /api/v1/version until it answers, Gitea exits, or a
// minute passes.
func (g *Gitea) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-g.done:
			g.done <- err
			return fmt.Errorf("gitea web exited before it was ready: %v\n%s", err, g.LogTail(60))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := g.http.Get(g.URL + "/api/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("gitea did not answer on %s within a minute\n%s", g.URL, g.LogTail(60))
}

// Stop terminates Gitea (and any git processes it started): SIGTERM, then
// SIGKILL after ten seconds.
func (g *Gitea) Stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	pgid := g.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-g.done:
		g.done <- err
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err := <-g.done
		g.done <- err
	}
}

// LogTail returns the last n lines of Gitea's output, for failure messages.
func (g *Gitea) LogTail(n int) string {
	f, err := os.Open(g.logPath)
	if err != nil {
		return "(no gitea log: " + err.Error() + ")"
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "gitea log (last lines):\n" + strings.Join(lines, "\n")
}

// linkTree hard-links (or, across file systems, copies) src into dst.
func linkTree(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if err := os.Link(path, target); err == nil || errors.Is(err, os.ErrExist) {
			return nil
		}
		return copyFile(path, target, info.Mode())
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package giteaharness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// RunUser is the system user Gitea runs as when the tests run as root.
const RunUser = "cairn-gitea"

// account is who Gitea runs as.
type account struct {
	name     string
	uid, gid int
	// switchTo is set when the harness runs as root and must drop to the
	// account to start Gitea.
	switchTo bool
}

// runAccount returns the current user, or RunUser (created with useradd when
// missing) when running as root.
func runAccount() (account, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return account{}, fmt.Errorf("failed to look up the current user: %w", err)
		}
		return account{name: u.Username, uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup(RunUser)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		out, addErr := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--shell", "/usr/sbin/nologin", RunUser).CombinedOutput()
		if addErr != nil && !strings.Contains(string(out), "already exists") {
			return account{}, fmt.Errorf("failed to create the user %s (gitea refuses to run as root): %v: %s", RunUser, addErr, out)
		}
		u, err = user.Lookup(RunUser)
	}
	if err != nil {
		return account{}, fmt.Errorf("failed to look up the user %s: %w", RunUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{name: RunUser, uid: uid, gid: gid, switchTo: true}, nil
}

func (a account) credential() *syscall.Credential {
	if !a.switchTo {
		return nil
	}
	return &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}
}

// chown gives dir and the named paths below it to the account.
func (a account) chown(dir string, paths ...string) error {
	if !a.switchTo {
		return nil
	}
	for _, p := range append([]string{""}, paths...) {
		if err := os.Lchown(filepath.Join(dir, p), a.uid, a.gid); err != nil {
			return err
		}
	}
	return nil
}

// makeReachable lets the account traverse the directories above dir. Only
// directories inside the system temporary directory are changed (adding the
// search bit for others); anything else that blocks is an error.
func (a account) makeReachable(dir string) error {
	if !a.switchTo {
		return nil
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o001 == 0 {
			if !strings.HasPrefix(d, tmp+string(filepath.Separator)) {
				return fmt.Errorf("gitea's work directory %s is not reachable by %s: %s is not searchable by others", dir, a.name, d)
			}
			if err := os.Chmod(d, info.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("failed to make %s searchable: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

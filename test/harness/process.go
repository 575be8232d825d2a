package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one child of the harness, in its own process group so that it
// outlives a detached `up` and can be signalled with everything it started.
type process struct {
	name    string
	pid     int
	start   uint64        // start time from /proc, guards against pid reuse
	exited  chan struct{} // closed when the child is reaped; nil when attached
	logPath string
}

// launcher starts processes with their logs in dir/logs and pids in dir/pids.
type launcher struct {
	dir      string
	detached bool
}

func (l launcher) start(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(l.dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the log of %s: %w", name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "+ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = l.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !l.detached {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, exited: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	p.start, _ = procStartTime(p.pid)
	return p, writePidFile(l.dir, p)
}

// running reports whether the process is still the one the harness started.
func (p *process) running() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	start, err := procStartTime(p.pid)
	return err == nil && start == p.start
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	if p.waitExit(grace) {
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.waitExit(5 * time.Second)
}

func (p *process) waitExit(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !p.running() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// logTail returns the last lines of the process log, for error messages.
func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (p *process) exitError() error {
	return fmt.Errorf("%s exited (log %s):\n%s", p.name, p.logPath, p.logTail(20))
}

func writePidFile(dir string, p *process) error {
	path := filepath.Join(dir, "pids", p.name+".pid")
	data := fmt.Sprintf("%d %d\n", p.pid, p.start)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// readPidFiles returns the processes recorded in dir/pids, in start order.
func readPidFiles(dir string) ([]*process, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "pids"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the pid directory: %w", err)
	}
	var procs []*process
	for _, name := range componentOrder {
		if !containsEntry(entries, name+".pid") {
			continue
		}
		p, err := readPidFile(dir, name)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func readPidFile(dir, name string) (*process, error) {
	path := filepath.Join(dir, "pids", name+".pid")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	var p = process{name: name, logPath: filepath.Join(dir, "logs", name+".log")}
	if _, err := fmt.Sscanf(string(data), "%d %d", &p.pid, &p.start); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return &p, nil
}

func containsEntry(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

// procStartTime reads the start time (field 22 of /proc/PID/stat) of a live,
// non-zombie process.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

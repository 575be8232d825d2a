package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
)

// logFlags configure the logger of a long-running command.
type logFlags struct {
	level, format string
}

func (f *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.level, "log-level", "info", "log level: debug, info or error")
	cmd.Flags().StringVar(&f.format, "log-format", "text", "log format on stderr: text or json (one JSON object a line; progress lines too)")
}

// slogLevels maps --log-level to slog levels; logr's V(n) is slog level -n, so debug
// shows V(1) and beyond, error only errors.
var slogLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "error": slog.LevelError}

// logger builds the logr.Logger (through log/slog) writing to w.
func (f *logFlags) logger(w io.Writer) (logr.Logger, error) {
	level, ok := slogLevels[f.level]
	if !ok {
		return logr.Logger{}, fmt.Errorf("--log-level must be debug, info or error, not %q", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.format {
	case "text":
		return logr.FromSlogHandler(slog.NewTextHandler(w, opts)), nil
	case "json":
		return logr.FromSlogHandler(slog.NewJSONHandler(w, opts)), nil
	}
	return logr.Logger{}, fmt.Errorf("--log-format must be text or json, not %q", f.format)
}

// progressWriter returns where the engine writes its progress lines: w as they are in
// text format, the logger (one "progress" entry a line) in json format, so that
// stderr holds only JSON lines.
func (f *logFlags) progressWriter(w io.Writer, log logr.Logger) io.Writer {
	if f.format != "json" {
		return w
	}
	return &logLineWriter{log: log}
}

// logLineWriter logs each complete line written to it, and each step about an
// instance with its instance and revision keys (a reconciler.StepLogger).
type logLineWriter struct {
	log logr.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // an incomplete line waits for its end
			return len(p), nil
		}
		l.log.Info("progress", "step", strings.TrimSuffix(line, "\n"))
	}
}

// Step logs one line of progress about an instance.
func (l *logLineWriter) Step(instance, revision, line string) {
	l.log.Info("progress", "step", line, "instance", instance, "revision", revision)
}

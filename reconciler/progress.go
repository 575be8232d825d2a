package reconciler

import "fmt"

// StepLogger is an Options.Progress that takes each step about one instance with its
// instance (namespace/name) and revision, so a structured log can carry them as keys
// (cairn's JSON log does); other writers get the line as it is.
type StepLogger interface {
	Step(instance, revision, line string)
}

// step writes one line of progress about the instance key.
func (in *revisionInput) step(key, format string, args ...any) {
	if sl, ok := in.e.opts.Progress.(StepLogger); ok {
		sl.Step(key, in.rev.SHA, fmt.Sprintf(format, args...))
		return
	}
	in.e.progress(format, args...)
}

package loop

import (
	"context"
	"fmt"
	"io"

	"cairn.dev/cairn/reconciler"
)

// PrintResult writes a sync's result: the revision, then one line per instance.
func PrintResult(w io.Writer, res *reconciler.SyncResult) {
	if res.Error != nil {
		fmt.Fprintf(w, "revision %s not synced: %v\n", res.Revision, res.Error)
		return
	}
	if res.Interrupted {
		fmt.Fprintf(w, "sync of revision %s interrupted\n", res.Revision)
	} else {
		fmt.Fprintf(w, "synced revision %s\n", res.Revision)
	}
	for _, i := range res.Instances {
		fmt.Fprintf(w, "  %-40s %-9s %s\n", i.Namespace+"/"+i.Name, i.Action, i.Message)
		for _, warning := range i.Warnings {
			fmt.Fprintf(w, "  %-40s warning: %s\n", "", warning)
		}
	}
}

// driftDue reports whether a drift check of the last synced revision is due.
func (l *Loop) driftDue() bool {
	return l.rev.SHA != "" && l.opts.DriftInterval > 0 && l.now().Sub(l.lastDrift) >= l.opts.DriftInterval
}

// checkDrift compares the live objects with the last synced revision.
func (l *Loop) checkDrift(ctx context.Context) error {
	l.lastDrift = l.now()
	reports, err := l.opts.Engine.CheckDrift(ctx, l.rev)
	if err != nil {
		return err
	}
	for _, r := range reports {
		printDrift(l, r)
	}
	return nil
}

func printDrift(l *Loop, r reconciler.DriftReport) {
	key := r.Namespace + "/" + r.Name
	switch {
	case r.Err != nil:
		l.opts.Log.Error(r.Err, "drift check failed", "instance", key, "revision", l.rev.SHA)
	case len(r.Drifted) > 0:
		fmt.Fprintf(l.opts.Out, "  %-40s drift (%s): %d object(s), %d corrected: %v\n",
			key, r.Policy, len(r.Drifted), r.Corrected, r.Drifted)
	}
	if r.Err == nil && len(r.Rotated) > 0 {
		fmt.Fprintf(l.opts.Out, "  %-40s rotated generated Secrets: %v\n", key, r.Rotated)
	}
}

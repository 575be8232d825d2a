package loop

import (
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

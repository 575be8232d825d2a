// Command testreport reads `go test -json` output on stdin and prints what `go test`
// prints without -v: each package's result and the full output of failed tests. It
// exits non-zero when a test or package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	outputs := map[string]*strings.Builder{} // package/test -> output
	failed := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Println(sc.Text()) // build errors and the like are not JSON
			continue
		}
		key := ev.Package + "/" + ev.Test
		switch ev.Action {
		case "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(ev.Output)
		case "fail":
			failed = true
			if b := outputs[key]; b != nil {
				fmt.Print(b.String())
			}
			delete(outputs, key)
		case "pass", "skip":
			if ev.Test == "" {
				fmt.Print(lastLine(outputs[key]))
			}
			delete(outputs, key)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// lastLine is a package's summary line ("ok  pkg 1.2s").
func lastLine(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

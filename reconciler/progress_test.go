package reconciler

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

type steps [][3]string

func (s *steps) Write(p []byte) (int, error) {
	*s = append(*s, [3]string{"", "", string(p)})
	return len(p), nil
}

func (s *steps) Step(instance, revision, line string) {
	*s = append(*s, [3]string{instance, revision, line})
}

func TestStepCarriesInstanceAndRevision(t *testing.T) {
	g := NewWithT(t)
	var logged steps
	in := &revisionInput{e: &Engine{opts: Options{Progress: &logged}}, rev: Revision{SHA: "abc"}}
	in.step("team/app", "apply %s: %d objects", "team/app", 3)
	g.Expect(logged).To(Equal(steps{{"team/app", "abc", "apply team/app: 3 objects"}}))

	var plain bytes.Buffer
	in.e.opts.Progress = &plain
	in.step("team/app", "wait %s", "team/app")
	g.Expect(plain.String()).To(Equal("wait team/app\n"), "a plain writer gets the line")
	in.e.opts.Progress = nil
	in.step("team/app", "wait %s", "team/app") // no progress: nothing, no panic
}

package github

import (
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/ghhook"
)

// actions maps GitHub's pull request actions to cairn's.
var actions = map[string]string{
	"opened": forge.PROpened, "synchronize": forge.PRSynchronize, "reopened": forge.PRReopened, "edited": forge.PREdited, "closed": forge.PRClosed,
}

// Parse implements forge.Webhook for the push and pull_request events; ping
// and every other event are ignored.
func (Provider) Parse(event string, body []byte) (forge.Event, error) {
	return ghhook.Parse(Name, actions, event, body)
}

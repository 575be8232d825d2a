// Package forge owns cairn's conversation with a Git forge (Gitea, GitHub,
// GitLab): the small Forge interface its backends implement (commit statuses,
// the one plan comment on a pull request, a pull request's base and head), the
// bounded asynchronous Queue that posts through it without ever blocking a
// sync, the webhook Receiver that turns signed forge deliveries into typed
// events, and the Markdown cutter that fits a plan into a forge's comment limit.
//
// The backends live in the sub-packages gitea, github and gitlab; this package
// imports none of them.
//
// # Trust
//
// A webhook only ever wakes cairn up: the SHA a payload carries is passed on
// as a hint (Push.SHAHint) and never as the revision to apply; the sync loop
// fetches and reads the branch head itself. Every delivery is authenticated
// (HMAC-SHA256 for Gitea and GitHub, the shared token for GitLab, compared in
// constant time) before its body is parsed, the body is capped before it is
// read, each source address is rate limited, and a malformed payload gets 400,
// never a panic.
//
// # Secrets
//
// Clients take their token as a string (read by the caller from a Secret or a
// file) and never log it; every error they return has the token scrubbed out
// (see Redact), and a commit status description is redacted, flattened to one
// line and cut to the forge's limit before it is sent.
package forge

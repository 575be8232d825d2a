// Package giteaharness runs a real Gitea for cairn's forge tests: it builds
// Gitea once with hack/build-gitea.sh (cached by version outside the
// checkout), starts it on 127.0.0.1 with a free port and SQLite as an
// unprivileged user (Gitea refuses to run as root), creates an admin user and
// an API token, and offers the API helpers tests need: repositories, files
// and branches, pull requests, webhooks, and reading back commit statuses
// and comments.
//
// It never skips: a Gitea that cannot be built or started is an error that
// names the step and quotes Gitea's log.
package giteaharness

// Package gitsource owns cairn's view of a Git repository: it fetches one
// branch with go-git into a persistent cache clone, and hands out the tree at a
// commit, the paths changed between two commits and commit metadata as plain
// values.
//
// # Fetch strategy
//
// The cache clone is a bare repository on disk under Options.CacheDir, one per
// URL. It holds the full history of the tracked branch only (single-branch, no
// shallow clone): Diff must find the last synced commit, which a depth-1 clone
// would not have, and go-git's incremental fetches into shallow repositories are
// unreliable. The first Fetch downloads the branch history once; every later
// Fetch advertises the cached branch tip as a "have", so the server sends only
// the new objects. Head is a single ls-remote (one round trip) and Fetch of a
// commit already in the cache does not touch the network. The bytes received
// by one fetch are capped by Limits.MaxTotalBytes. Each incremental fetch adds
// one pack; once the cache holds more than 64, the next fetch starts a fresh
// clone (one pack) instead of accumulating more. A cache that cannot be opened
// (not a bare repository, unreadable branch tips) is removed and re-cloned.
//
// Transports are chosen per Source, never through go-git's global protocol
// registry: https (and http with Options.AllowHTTP) through net/http, ssh
// through golang.org/x/crypto/ssh with the host key checked against
// Auth.KnownHosts, and file:// through go-git's in-process server, so no Git
// binary is ever executed. Every network step (ref listing included) runs
// under Options.Timeout; for ssh the connection itself is closed when the
// deadline passes, so a host that accepts and never answers cannot hang a
// handshake.
//
// # Credentials and redirects
//
// Credentials are taken from Auth (or from the userinfo of an https URL) and
// never appear in an error: every message names the URL without userinfo, and
// the secrets themselves are scrubbed from wrapped causes. go-git's HTTP
// transport follows redirects only for the initial ref discovery and drops
// every credential-bearing header as soon as a redirect leaves the origin
// (scheme, host and port); on top of that, a Source with credentials refuses
// any redirect to another host:port altogether, so auth is never offered to a
// second host. Submodules are never fetched: a gitlink in a tree is rejected.
//
// # Trees
//
// A Tree holds regular files only, in memory. Gitlinks, entries
// named "..", ".git" (in any case or spelling Git itself refuses), absolute or
// backslashed names, Git LFS pointer files and anything over Limits are
// rejected with an error that names the path, never the content. A symbolic
// link is never followed nor read: it is listed in its directory as an
// fs.ModeSymlink entry that cannot be opened (Tree.Link), so that it fails only
// what reads that directory (the module of one instance), naming the link.
package gitsource

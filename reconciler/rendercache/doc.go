// Package rendercache owns the render cache: renders remembered by a digest of
// everything that determines them (the whole render request, the module's content
// and cairn's version), in memory and on disk across restarts, never with a
// Secret's data on disk.
package rendercache

//go:build !race

package declarations

// slowdown scales time bounds: the race detector makes code several times slower.
const slowdown = 1

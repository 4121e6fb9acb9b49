//go:build !race

package rpc

// raceEnabled reports whether the race detector is on: it allocates for
// what it watches.
const raceEnabled = false

//go:build !race

package rpc

// raceEnabled: the race detector is on, and allocates for what it watches.
const raceEnabled = false

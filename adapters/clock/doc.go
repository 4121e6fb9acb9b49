// Package clock is the system clock behind ports.Clock. It must not know
// anything about the fire loop or sessions.
package clock

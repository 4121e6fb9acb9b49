// Package clock is the machine's clock behind ports.Clock: System, with
// Go's timers, and Precise, whose timers finish their wait on a timerfd so
// the fire loop wakes within a fraction of a millisecond of a deadline
// instead of up to a millisecond after it. It must not know anything about
// the fire loop or sessions.
package clock

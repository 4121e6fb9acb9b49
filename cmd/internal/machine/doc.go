// Package machine is what the measuring commands share about the machine
// they run on and how they summarise: the load average they print, a
// process's CPU time (its CPU clock, to the nanosecond) and resident
// memory (from /proc), and one percentile rule. It must not know what
// they measure.
package machine

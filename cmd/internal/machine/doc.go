// Package machine reads what the measuring commands print about the
// machine they ran on. It must not know what they measure.
package machine

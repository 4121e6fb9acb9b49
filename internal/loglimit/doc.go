// Package loglimit lets one log line through per interval and counts the
// ones it held back, so that a hostile client or a flapping engine cannot
// flood the logs through an adapter or a served port: a Limiter for the
// caller's own lines, and a Writer for the lines a library writes to a
// *log.Logger. It imports the standard library only (adapters and cmd
// share it) and must not know what is logged.
package loglimit

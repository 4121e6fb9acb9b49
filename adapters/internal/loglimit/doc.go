// Package loglimit lets one log line through per interval and counts the
// ones it held back, so that a hostile client or a flapping engine cannot
// flood the logs through an adapter. It must not know what is logged.
package loglimit

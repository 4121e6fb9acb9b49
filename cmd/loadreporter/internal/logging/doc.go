// Package logging is how the commands that run for long (serve, fleet)
// build their log: --log-level and --log-format, read the same way, and
// one slog handler whose errors stay on one line, so that every command's
// log reads and parses alike.
//
// It must not know what a command logs.
package logging

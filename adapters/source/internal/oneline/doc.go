// Package oneline folds engine-provided text (error bodies, parser
// messages, gRPC status messages) into one printable line, so a report's
// last_error and a log line never span lines. It knows nothing of engines.
package oneline

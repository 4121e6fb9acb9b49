// Package envflag reads a command's flags from the command line and from
// LOADREPORTER_* environment variables, and prints a usage that names
// both. The serve command (package app) and the client commands (package
// cli) share it so every command reads its settings the same way, says a
// refused value the same way (one line: the flag, the value, what is
// wanted, and a hint to run --help), prints its usage only when asked
// (--help), and names the LOADREPORTER_* variables it does not read
// (Environ), instead of ignoring a typo, and hides the passwords of a
// connection-string flag in what they print (RedactURL).
//
// It knows flag sets, the environment and where a URL or a libpq
// keyword/value string keeps a password: nothing about what a flag
// configures, nor any other package of the project.
package envflag

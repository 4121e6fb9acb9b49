// Package app is loadreporter's composition root: serve's configuration
// from flags and LOADREPORTER_* variables, by subsystem (config.go), the
// registry of snapshot sources (sources.go), the providers of core and
// adapters, each taking the sections it reads, and their Wire injector
// (wire.go), and Main, which serves everything on one port. Tests in
// /tests boot this very composition on 127.0.0.1:0.
//
// Settings are validated by the constructors they configure, not here: a
// package names the option it refuses (domain.InvalidOption) and the one
// table in flags.go says which flag set it; source packages, which
// declare their own flags, name those flags themselves.
//
// It is the only package that knows every other package; nothing imports
// it but the binary and the end-to-end tests. Wire stays in here: the
// providers are ordinary constructors, so the service can be wired by
// hand. It must not hold the client commands (watch, audit, migrate: they
// live in package cli) nor logic the core or an adapter should own.
package app

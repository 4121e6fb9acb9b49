// Package app is loadreporter's composition root: serve's configuration
// from flags and LOADREPORTER_* variables, the providers of core and
// adapters and their Wire injectors (wire.go), and Main, which serves
// everything on one port. Tests in /tests boot this very composition on
// 127.0.0.1:0.
//
// It is the only package that knows every other package; nothing imports
// it but the binary and the end-to-end tests. Wire stays in here: the
// providers are ordinary constructors, so the service can be wired by
// hand. It must not hold the client commands (watch, audit, migrate: they
// live in package cli) nor logic the core or an adapter should own.
package app

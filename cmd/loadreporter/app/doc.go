// Package app is loadreporter's composition root: configuration from flags
// and LOADREPORTER_* variables, the wiring of core and adapters (a Wire
// injector in wire.go), and Main, which serves everything on one port.
// Tests in /tests boot this very composition on 127.0.0.1:0.
//
// It is the only package that knows every other package; nothing imports it
// but the binary and the end-to-end tests.
package app

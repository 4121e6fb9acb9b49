// Package tests holds end-to-end tests: each boots the composition the
// binary runs (cmd/loadreporter/app) on 127.0.0.1:0 and talks to it as
// routers, browsers and operators do, with stock clients.
//
// Nothing here is imported by the service.
package tests

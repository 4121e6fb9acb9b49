// Package migrations holds the versioned SQL that creates the history schema
// in PostgreSQL. Files are goose SQL migrations named NNNN_description.sql,
// each with -- +goose Up and -- +goose Down sections, applied in version
// order, each once, by Migrate in adapters/store/postgres (used by
// `loadreporter migrate` and at `serve` start). Never edit a file that has
// been released: add the next number instead.
//
// This package holds data only; it must not know how or by whom the SQL is
// run.
package migrations

// Package migrations holds the versioned SQL that creates the history schema
// in PostgreSQL. Files are named NNNN_description.sql and applied in version
// order, each once, by the migrator in adapters/store/postgres (used by
// `loadreporter migrate` and at `serve` start). Never edit a file that has
// been released: add the next number instead.
//
// This package holds data only; it must not know how or by whom the SQL is
// run.
package migrations

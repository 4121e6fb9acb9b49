// Package pgtest gives a test a PostgreSQL of its own: the test server's
// URL (DATABASE_URL, or the local server), a fresh schema dropped when the
// test ends, and the rule every history test follows — skip with a message
// that says how to run it when no server answers, fail instead under
// CI=true, where the database is always there.
//
// It is test support, imported only by test code. It must not know the
// history's tables: what a schema holds is the caller's business.
package pgtest

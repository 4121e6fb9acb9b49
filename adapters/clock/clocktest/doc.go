// Package clocktest is a fake ports.Clock for deterministic tests: time moves
// only when the test calls Advance, and tests can wait until the code under
// test has armed its timers. It must not be used outside tests, and knows
// nothing of what the timers are for.
package clocktest

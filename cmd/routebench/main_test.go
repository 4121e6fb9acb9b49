package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: an
// end-to-end row must stop its engines, routers and pollers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

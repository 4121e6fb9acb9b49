package enginesim

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// engine's driver, publisher, servers and handlers must all end on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closeIdle{m},
		// zmq4's PUB socket does not stop its writer on Close.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	)
}

// closeIdle drops the test clients' kept-alive connections once every
// test ran, so that only what the engine left shows.
type closeIdle struct{ m *testing.M }

func (c closeIdle) Run() int {
	code := c.m.Run()
	http.DefaultClient.CloseIdleConnections()
	return code
}

package app

// InitializeMain wires the service from its configuration. When a
// provider fails, what the earlier ones opened (pool, connections) is
// released before the error returns, which names the flag at fault
// (flagError); otherwise Main.Close releases it.
func InitializeMain(c Config) (*Main, error) { return adopt(initializeMain(c, givenEngine{})) }

// InitializeMainWithEngine wires the service around a given snapshot
// source (end-to-end tests use counting and scripted engines); the caller
// keeps owning e.
func InitializeMainWithEngine(c Config, e Engine) (*Main, error) {
	return adopt(initializeMain(c, givenEngine{e}))
}

// adopt hands Wire's cleanup to Main, so one Close releases everything.
func adopt(m *Main, cleanup func(), err error) (*Main, error) {
	if err != nil {
		return nil, flagError(err)
	}
	m.cleanup = cleanup
	return m, nil
}

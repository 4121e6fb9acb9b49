//go:build wireinject

package app

import "github.com/google/wire"

// initializeMain wires the service from its configuration.
func initializeMain(c Config) (*Main, func(), error) {
	wire.Build(coreSet, adapterSet, transportSet, NewEngine, NewMain)
	return nil, nil, nil
}

// initializeMainWithEngine wires the service around a given engine.
func initializeMainWithEngine(c Config, e Engine) (*Main, func(), error) {
	wire.Build(coreSet, adapterSet, transportSet, NewMain)
	return nil, nil, nil
}

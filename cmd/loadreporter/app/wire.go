//go:build wireinject

package app

import "github.com/google/wire"

// initializeMain wires the service from its configuration, around given
// when it holds a source (InitializeMainWithEngine).
func initializeMain(c Config, given givenEngine) (*Main, func(), error) {
	wire.Build(configSet, coreSet, adapterSet, transportSet, wire.Struct(new(Parts), "*"), NewMain)
	return nil, nil, nil
}

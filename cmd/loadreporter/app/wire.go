//go:build wireinject

package app

import "github.com/google/wire"

// InitializeMain wires the service from its configuration.
func InitializeMain(c Config) (*Main, error) {
	wire.Build(NewLogger, NewClock, NewEngine, NewMetrics, NewHistory, NewHistoryService, NewFireLoop, NewMonitor, NewWatch, NewAdmin, NewPoll, NewDashboard,
		NewHealth, NewReadiness, NewHandler, NewServer, NewMain)
	return nil, nil
}

// InitializeMainWithEngine wires the service around a given snapshot
// source (end-to-end tests use counting and scripted engines).
func InitializeMainWithEngine(c Config, e Engine) (*Main, error) {
	wire.Build(NewLogger, NewClock, NewMetrics, NewHistory, NewHistoryService, NewFireLoop, NewMonitor, NewWatch, NewAdmin, NewPoll, NewDashboard,
		NewHealth, NewReadiness, NewHandler, NewServer, NewMain)
	return nil, nil
}

//lint:file-ignore U1000 the sets are used by the injector in wire.go, which only the wireinject build sees

package app

import (
	"github.com/cenkalti/backoff/v5"
	"github.com/google/wire"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/orca"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/ports"
)

// The provider sets, one per layer, that the injector in wire.go is built
// from. They name ordinary constructors only, so the same graph can be
// wired by hand; each provider takes the sections of Config it reads.

// configSet hands each section of Config to the providers that read it.
var configSet = wire.NewSet(
	wire.FieldsOf(new(Config), "Source", "Server", "Worker", "Security", "History", "Front", "Poll", "Fire",
		"Sessions", "Streams", "Logs"),
)

// coreSet is the core: the clock, the history (store, recorder with its
// retry backoff, retention) and the fire loop with its observers. Wire
// wants a binding beside its provider, so the small interfaces the
// transports own are bound to the loop here.
var coreSet = wire.NewSet(
	NewLogger,
	wire.Value(clock.System{}),
	wire.Bind(new(ports.Clock), new(clock.System)),
	wire.Value(clock.Precise{}), // the fire loop's
	NewHistory,
	NewBackoff,
	wire.Bind(new(ports.Backoff), new(*backoff.ExponentialBackOff)),
	NewRecorder,
	NewRetention,
	NewWorker,
	NewFireObserver,
	NewFireLoop,
	wire.Bind(new(rpc.Subscriber), new(*fireloop.Loop)),
	wire.Bind(new(rpc.Topology), new(*fireloop.Loop)),
	wire.Bind(new(pollapi.Poller), new(*fireloop.Loop)),
)

// adapterSet is what the core reads through adapters: the snapshot
// source (a row of sources, or the Engine the caller gives), the
// simulator's controls and the metrics.
var adapterSet = wire.NewSet(
	NewEngine,
	NewForwarded,
	NewSimControl,
	NewMetrics,
)

// transportSet is everything served on the one port: the RPC services,
// polling, the dashboard, probes, access, the handler and the server.
var transportSet = wire.NewSet(
	NewMonitor,
	orca.New,
	wire.Value(orca.Options{}),
	rpc.NewWatch,
	NewAdmin,
	NewHistoryService,
	NewPoll,
	NewDashboard,
	NewHealth,
	NewReadiness,
	NewStalls,
	NewTLS,
	NewAccess,
	NewBounds,
	wire.Struct(new(Routes), "*"),
	NewHandler,
	NewServer,
	NewNativePort,
	NewFront,
)

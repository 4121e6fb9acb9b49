package app

import (
	"errors"
	"flag"
	"io"
	"strings"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/source/sglanggrpc"
	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
	"github.com/loadreporter/loadreporter/adapters/source/sglangzmq"
	"github.com/loadreporter/loadreporter/adapters/source/sim"
	"github.com/loadreporter/loadreporter/adapters/source/vllm"
	"github.com/loadreporter/loadreporter/ports"
)

// sourceRow is one snapshot source serve can read: a package under
// adapters/source that exports its Name, its Options (with RegisterFlags
// for the options of its own) and New. Adding a source is its package and
// one row here (its options' field in SourceConfig beside it, when it has
// options of its own); TestSourceContract runs ports/porttest's source
// contract over every row. docs/adding-a-source.md says it step by step.
type sourceRow struct {
	// name is the --source value, the package's Name.
	name string
	// flags declares the source's own flags into c (nil: it has none
	// beyond the engine settings every source shares).
	flags func(c *SourceConfig, fs *flag.FlagSet)
	// open builds the source from c; the closer releases what it holds
	// (nil when nothing). Nothing may run before Engine.Start.
	open func(c SourceConfig, d sourceDeps) (ports.SnapshotSource, io.Closer, error)
	// getLoadShape is the shape of GET /get_load the source's engine
	// serves, for --get-load-shape's default (empty: sglang's).
	getLoadShape string
}

// sourceDeps is what a source may need besides its configuration.
type sourceDeps struct {
	clock   ports.Clock
	metrics *metrics.Metrics
}

// sources is the registry: one row per source, in the order --help names
// them.
var sources = []sourceRow{
	{
		name:  sim.Name,
		flags: func(c *SourceConfig, fs *flag.FlagSet) { c.Sim.RegisterFlags(fs) },
		open: func(c SourceConfig, d sourceDeps) (ports.SnapshotSource, io.Closer, error) {
			o := c.Sim
			o.Ranks, o.Clock = c.DPSize, d.clock
			s, err := sim.New(o)
			return s, nil, err
		},
	},
	{
		name: sglanghttp.Name,
		open: func(c SourceConfig, _ sourceDeps) (ports.SnapshotSource, io.Closer, error) {
			s, err := sglanghttp.New(sglanghttp.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey})
			return s, s, err
		},
	},
	{
		name: sglanggrpc.Name,
		open: func(c SourceConfig, _ sourceDeps) (ports.SnapshotSource, io.Closer, error) {
			s, err := sglanggrpc.New(sglanggrpc.Options{Target: c.EngineURL, APIKey: c.EngineAPIKey})
			return s, s, err
		},
	},
	{
		name:  sglangzmq.Name,
		flags: func(c *SourceConfig, fs *flag.FlagSet) { c.ZMQ.RegisterFlags(fs) },
		open:  openZMQ,
	},
	{
		name:  vllm.Name,
		flags: func(c *SourceConfig, fs *flag.FlagSet) { c.VLLM.RegisterFlags(fs) },
		open: func(c SourceConfig, d sourceDeps) (ports.SnapshotSource, io.Closer, error) {
			o := c.VLLM
			o.BaseURL, o.APIKey, o.Clock = c.EngineURL, c.EngineAPIKey, d.clock
			s, err := vllm.New(o)
			return s, s, err
		},
		getLoadShape: pollapi.GetLoadVLLM,
	},
}

// sourceRowNamed returns the row of --source name.
func sourceRowNamed(name string) (sourceRow, bool) {
	for _, r := range sources {
		if r.name == name {
			return r, true
		}
	}
	return sourceRow{}, false
}

// sourceNames lists the rows' names for --source's help and refusal.
func sourceNames() string {
	names := make([]string, len(sources))
	for i, r := range sources {
		names[i] = r.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// openZMQ builds the sglang-zmq source, with the sglang-http source on the
// same engine as its detail pull when --engine-url is known, and its
// socket events counted in the metrics.
func openZMQ(c SourceConfig, d sourceDeps) (ports.SnapshotSource, io.Closer, error) {
	o := c.ZMQ
	o.EngineURL, o.APIKey, o.DPSize, o.MaxDPSize = c.EngineURL, c.EngineAPIKey, c.DPSize, c.MaxDPSize
	o.Clock, o.Observer = d.clock, zmqObserver(d.metrics)
	var detail *sglanghttp.Source
	if c.EngineURL != "" && o.DetailInterval > 0 {
		h, err := sglanghttp.New(sglanghttp.Options{BaseURL: c.EngineURL, APIKey: c.EngineAPIKey})
		if err != nil {
			return nil, nil, err
		}
		detail, o.Detail = h, h
	} else if o.DetailInterval >= 0 {
		o.DetailInterval = 0 // no engine to pull the detail from
	}
	s, err := sglangzmq.New(o)
	if err != nil {
		if detail != nil {
			_ = detail.Close()
		}
		return nil, nil, err
	}
	if detail == nil {
		return s, s, nil
	}
	return s, closers{s, detail}, nil
}

// zmqObserver counts what the ZMQ sockets see besides load.
func zmqObserver(m *metrics.Metrics) sglangzmq.Observer {
	if m == nil {
		return sglangzmq.Observer{}
	}
	return sglangzmq.Observer{
		SequenceReset: func(rank int) { m.SourceEvent("sequence_reset", rank) },
		SequenceGap:   func(rank int, _ uint64) { m.SourceEvent("sequence_gap", rank) },
		BadMessage:    func(rank int, _ error) { m.SourceEvent("bad_message", rank) },
		Resubscribed:  func(rank int) { m.SourceEvent("resubscribed", rank) },
		DetailPull: func(err error) {
			if err != nil {
				m.SourceEvent("detail_pull_failed", -1)
			}
		},
	}
}

// closers closes each in order and joins their errors.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

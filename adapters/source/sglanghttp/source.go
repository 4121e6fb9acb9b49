package sglanghttp

import (
	"context"
	"net/http"

	"github.com/loadreporter/loadreporter/adapters/source/internal/httpfetch"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Name is the source's name, the --source value that selects it.
const Name = "sglang-http"

// DefaultMaxBodyBytes bounds a response body when Options.MaxBodyBytes is 0.
// A core response is well under a kilobyte per rank, so 1 MiB leaves room for
// hundreds of ranks and the optional sections while keeping a misbehaving
// engine from making us buffer without limit.
const DefaultMaxBodyBytes = 1 << 20

// loadsPath is the endpoint, relative to the engine's base URL.
const loadsPath = "/v1/loads"

// Options configure a Source.
type Options struct {
	// BaseURL is the engine's address (the --engine-url flag), for example
	// http://127.0.0.1:30000. A path prefix is kept, for engines behind a
	// proxy that mounts them under one; the endpoint's own URL
	// (…/v1/loads, with or without a query) is accepted for the base URL
	// it ends in.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>" (the
	// --engine-api-key flag).
	APIKey string
	// Client is the HTTP client to use. When nil, the Source makes one
	// client of its own and reuses it, so connections to the engine are
	// kept alive between pulls. A Client.Timeout is allowed but never
	// needed: each pull ends when its context ends.
	Client *http.Client
	// MaxBodyBytes bounds the response body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Source pulls SGLang's /v1/loads?include=core. It is safe for concurrent
// use; it keeps no state between pulls besides the HTTP connection pool.
type Source struct {
	fetch *httpfetch.Fetcher
}

var _ ports.SnapshotSource = (*Source)(nil)

// New validates o and returns a Source. Problems are reported with code
// domain.CodeInvalidArgument and name the flag the operator has to fix.
func New(o Options) (*Source, error) {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	f, err := httpfetch.New(httpfetch.Options{
		Name:    Name,
		BaseURL: o.BaseURL, URLFlag: "--engine-url", Example: "http://127.0.0.1:30000", Peer: "engine",
		Path: loadsPath, Query: "include=core",
		APIKey: o.APIKey, APIKeyFlag: "--engine-api-key",
		Client: o.Client, MaxBodyBytes: o.MaxBodyBytes, Accept: "application/json",
	})
	if err != nil {
		return nil, err
	}
	return &Source{fetch: f}, nil
}

// URL returns the URL pulls request, with any password redacted.
func (s *Source) URL() string { return s.fetch.URL() }

// String describes the source for logs; it never shows the API key.
func (s *Source) String() string { return s.fetch.String() }

// Close drops idle connections of the client the Source made itself; a
// caller-supplied Client is left alone.
func (s *Source) Close() error { return s.fetch.Close() }

// Pull requests the engine's current per-rank load. It returns when ctx
// ends even if the engine stalls mid-body.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	body, err := s.fetch.Get(ctx)
	if err != nil {
		return domain.Snapshot{}, err
	}
	ranks, err := parseLoads(body)
	if err != nil {
		return domain.Snapshot{}, err
	}
	return domain.Snapshot{Ranks: ranks}, nil
}

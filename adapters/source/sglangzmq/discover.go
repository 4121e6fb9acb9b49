package sglangzmq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/httpfetch"
	"github.com/loadreporter/loadreporter/domain"
)

// serverInfoPath is SGLang's endpoint that advertises the load sockets.
const serverInfoPath = "/server_info"

// maxServerInfoBytes bounds the /server_info body: it is the engine's whole
// server arguments plus internal states, a few tens of kilobytes.
const maxServerInfoBytes = 4 << 20

// discoveryTimeout bounds one /server_info request.
const discoveryTimeout = 5 * time.Second

// discoverer finds the load sockets through GET <engine>/server_info.
type discoverer struct {
	fetch   *httpfetch.Fetcher
	host    string // the engine URL's host: the sockets' host
	dpSize  int    // Options.DPSize; 0 takes the engine's
	maxSize int    // Options.MaxDPSize
}

func newDiscoverer(c config) (*discoverer, error) {
	f, err := httpfetch.New(httpfetch.Options{
		Name:    Name,
		BaseURL: c.EngineURL, URLFlag: "--engine-url", Example: "http://127.0.0.1:30000", Peer: "engine",
		Path:   serverInfoPath,
		APIKey: c.APIKey, APIKeyFlag: "--engine-api-key",
		Client: c.Client, MaxBodyBytes: maxServerInfoBytes, Accept: "application/json",
	})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.EngineURL) // httpfetch has accepted it
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--engine-url %q: %v", c.EngineURL, err)
	}
	maxSize := c.MaxDPSize
	if maxSize <= 0 || maxSize > domain.MaxRanks {
		maxSize = domain.MaxRanks
	}
	return &discoverer{fetch: f, host: u.Hostname(), dpSize: c.DPSize, maxSize: maxSize}, nil
}

// serverInfo is the part of SGLang's /server_info read here. The kv_events
// block describes the KV-event publisher; load_endpoint_port_base and
// load_topic, when present, its load sockets. dp_size is read from the block
// and, for engines whose block lacks it, from the top level (the server
// arguments).
type serverInfo struct {
	KVEvents *struct {
		LoadEndpointPortBase *int    `json:"load_endpoint_port_base"`
		LoadTopic            *string `json:"load_topic"`
		DPSize               *int    `json:"dp_size"`
	} `json:"kv_events"`
	DPSize *int `json:"dp_size"`
}

// discover asks the engine once. Every failure is a one-line
// CodeSourceFailed error that Pull reports until discovery succeeds.
func (d *discoverer) discover(ctx context.Context) (endpoints, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	body, err := d.fetch.Get(ctx)
	if err != nil {
		return endpoints{}, err
	}
	fail := func(format string, args ...any) (endpoints, error) {
		return endpoints{}, domain.Errorf(domain.CodeSourceFailed, "GET %s: %s", d.fetch.URL(), fmt.Sprintf(format, args...))
	}
	var info serverInfo
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&info); err != nil {
		return fail("body is not the JSON object SGLang serves: %s", domain.Shorten(err.Error(), 200))
	}
	kv := info.KVEvents
	if kv == nil || kv.LoadEndpointPortBase == nil {
		return fail("the engine advertises no load sockets (no kv_events.load_endpoint_port_base): start SGLang with --load-publish-endpoint, or give --zmq-endpoint")
	}
	topic := DefaultTopic
	if kv.LoadTopic != nil && *kv.LoadTopic != "" {
		topic = *kv.LoadTopic
	}
	size := 1
	switch {
	case kv.DPSize != nil:
		size = *kv.DPSize
	case info.DPSize != nil:
		size = *info.DPSize
	}
	if d.dpSize != 0 && d.dpSize != size {
		return fail("the engine advertises dp_size %d, but --dp-size is %d", size, d.dpSize)
	}
	if size > d.maxSize {
		return fail("the engine advertises dp_size %d, more than --max-dp-size %d (a socket per rank)", size, d.maxSize)
	}
	ep, err := newEndpoints(d.host, *kv.LoadEndpointPortBase, size, topic)
	if err != nil {
		return fail("kv_events: %s", err)
	}
	return ep, nil
}

// URL is the discovery request's URL, with any password redacted.
func (d *discoverer) URL() string { return d.fetch.URL() }

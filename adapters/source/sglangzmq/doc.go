// Package sglangzmq is the snapshot source for SGLang's per-rank load
// sockets (docs/sources.md, source "sglang-zmq"): with --load-publish-endpoint,
// each scheduler (one per DP rank) publishes its load on a ZMQ PUB socket of
// its own, rank r on port base+r. The engine pushes; this package listens,
// keeps the latest value of each rank with the time it arrived, and answers
// Pull from that cache, so a fire costs the engine nothing.
//
// The sockets are found through GET <engine>/server_info
// (kv_events.load_endpoint_port_base, load_topic and dp_size, on the engine
// URL's host) or given as tcp://HOST:BASE with a DP size. Discovery is
// retried until the engine answers; it is not repeated afterwards.
//
// A message is three frames: the topic, an 8-byte big-endian sequence
// number and a msgpack array ["LoadStat", num_running_reqs,
// num_waiting_reqs, num_tokens, max_total_num_tokens, attn_dp_rank, …].
// It is decoded by position: the first five elements are required, null
// attn_dp_rank means the socket's rank, and newer engines' appended
// elements are read when known (num_waiting_uncached_tokens,
// num_total_tokens, max_running_requests) and ignored otherwise. A body
// that does not decode makes Pull fail, naming rank, endpoint, position and
// type, until a good message from that rank replaces it. A sequence that
// goes back (a restarted scheduler) or skips (messages PUB dropped) is
// counted through Options.Observer.
//
// Each rank's socket is a zmq4 SUB that redials a lost connection by itself
// and subscribes again on the new one; a rank silent for ResubscribeAfter
// gets a new socket, which also recovers a connection TCP never saw die.
// Sockets dial through a transport of this package's, registered once in
// zmq4's process-wide registry as "sglangzmq+tcp", whose connections close
// when their socket does, even mid-handshake.
//
// Each message is stamped with its arrival time on the injected clock, and
// that is the rank's SnapshotTime: a rank that stops publishing makes the
// report STALE with its true age, never silently fresh.
//
// What LoadStat does not carry is merged from a slower detail pull (the
// sglang-http source, every DetailInterval, in the Source's goroutine). A
// failing detail pull never fails Pull: its load fields drop to 0 once the
// last good pull is older than DetailMaxAge (three intervals by default),
// since no old load is reported as current (docs/routers.md), while the capacities
// it reported (max_running_requests, max_total_num_tokens), which are the
// engine's configuration and not load, are kept.
//
// domain.ValidateSnapshot requires num_used_tokens ≤ max_total_num_tokens
// and num_running_reqs ≤ max_running_requests. A busy rank whose capacities
// nobody tells (a five-value LoadStat with the detail pull off, or a 0
// capacity) therefore makes the report UNREACHABLE, naming rank and field;
// Options.MaxRunningRequests is the operator's way to give the second.
//
// What the source reports, and what it cannot know:
//
//	RankLoad field               from
//	---------------------------  ------------------------------------------------------------
//	dp_rank                      attn_dp_rank (body[5]) when not null, else the socket's rank
//	snapshot time                arrival of the rank's latest message; the engine sends no
//	                             sampling time, so network and queueing delay count as age
//	num_running_reqs             body[1]
//	num_waiting_reqs             body[2]
//	num_used_tokens              body[3] num_tokens
//	max_total_num_tokens         body[4]; when 0 (unknown), the detail pull's value; else 0
//	token_usage                  num_used_tokens / max_total_num_tokens; 0 when the max is 0
//	num_waiting_uncached_tokens  body[6] on newer engines, else the detail pull's, else 0
//	num_total_tokens             body[7] on newer engines, else the detail pull's, else 0
//	max_running_requests         body[8] on newer engines, else the detail pull's, else
//	                             Options.MaxRunningRequests
//	gen_throughput               the detail pull's only; 0 with the detail pull off
//	cache_hit_rate               the detail pull's only; 0 with the detail pull off
//	utilization                  the detail pull's only; 0 with the detail pull off
//	(not known)                  whether a silent rank is idle, wedged or gone: silence
//	                             only ages its value; messages PUB dropped under
//	                             back-pressure (only their number, from the sequence);
//	                             a port base the engine changed after a restart (discovery
//	                             is not repeated)
//
// It must not know about the fire loop, the pull budget, the expected rank
// set, stale-after, sessions or transports to routers, nor the format of
// the detail source's endpoint (that is the injected ports.SnapshotSource's
// business). Whether a snapshot is consistent (negative counters, used >
// max, duplicate or missing ranks) is judged by domain.ValidateSnapshot,
// not here.
//
// Name, Options (with RegisterFlags declaring its own flags,
// --zmq-endpoint, --zmq-max-running-requests and --detail-interval) and
// New are its row in serve's source registry
// (cmd/loadreporter/app/sources.go; docs/adding-a-source.md).
package sglangzmq

// Package pollapi answers routers that poll instead of holding a Monitor
// stream, in the shapes of the engines they poll: GET /v1/loads (SGLang's
// envelope, read by SMG), GET /get_load (SGLang's per-rank array or vLLM's
// {"load": N}, read by sglang-router and vllm-router) and SGLang's gRPC
// SglangScheduler/GetLoads (SMG's gRPC mode). Every poll is answered from
// the fire loop (the latest report when fresh, else the next fire's), so
// pollers never multiply pulls on the engine; a report no poller may route
// on is never answered as current numbers.
//
// It must not know how snapshots are pulled or how sessions are scheduled.
package pollapi

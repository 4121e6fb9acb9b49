// Package pollapi serves GET /v1/loads in SGLang's JSON shape for routers
// that poll (SMG, the SGLang gateway) instead of holding a Monitor stream.
// Every poll is answered from the fire loop (the latest report when fresh,
// else the next fire's), so pollers never multiply pulls on the engine.
//
// It must not know how snapshots are pulled or how sessions are scheduled.
package pollapi

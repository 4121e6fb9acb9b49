// Package ports holds the small interfaces the core needs from the outside
// world: where snapshots come from, what time it is, and where the fire
// loop's observations go. Adapters implement them; the core depends only on
// them.
//
// In this project "ports" means interfaces only. Inbound transports
// (Connect/gRPC handlers, pages) are adapters, not ports. This package must
// not import anything but the standard library and domain.
package ports

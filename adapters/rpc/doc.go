// Package rpc is the Connect adapter: the LoadMonitorService/Monitor
// handler (served as gRPC, gRPC-Web and Connect from one handler), the
// mapping between domain reports and wire messages, and the codecs that
// encode each report once per fire instead of once per router.
//
// It talks to the core through domain/reporter subscriptions only; it must
// not know how snapshots are pulled, scheduled or stored.
package rpc

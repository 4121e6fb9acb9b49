// Package fanout is what the streaming handlers (Monitor, Watch's peers,
// ORCA) share to send one message to many streams cheaply: a Message
// encodes at most once per codec however many streams send it; Latest
// keeps the Message of the latest report, since every stream of a fire
// sends the same one; Options installs connect codecs that send a
// *Message as its cached encoding, and gzip and deflate (gRPC's, the zlib
// format: grpcio routers may use it) that leave small messages
// uncompressed and compress a large one once for all the streams that
// send it (connect compresses per stream).
//
// It must not know what the messages mean: it sees protobuf messages and
// bytes, and leaves unmarshalling (with whatever checks a service wants) to
// the caller.
package fanout

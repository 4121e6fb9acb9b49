// Package fanoutgzip is gzip for connect handlers that send the same
// message to many streams (Monitor, Watch, ORCA): connect compresses once
// per stream, so this compressor remembers the last message it compressed
// and hands the same output to every stream that sends the same bytes,
// and it leaves small messages, where gzip costs more than it saves,
// uncompressed.
//
// It must not know what the messages are: it sees bytes only.
package fanoutgzip

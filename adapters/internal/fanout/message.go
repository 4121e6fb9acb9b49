package fanout

import (
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Message is a protobuf message whose encodings are computed at most once,
// so a report fanned out to a thousand streams is marshalled once per
// codec. It is what a handler's stream sends.
type Message struct {
	msg      proto.Message
	binOnce  sync.Once
	bin      []byte
	binErr   error
	jsonOnce sync.Once
	json     []byte
	jsonErr  error
}

// NewMessage wraps m, which must not change afterwards.
func NewMessage(m proto.Message) *Message { return &Message{msg: m} }

// Proto is the message itself.
func (f *Message) Proto() proto.Message { return f.msg }

// Binary is the message's protobuf encoding, shared by every caller: it
// must not be written to.
//
// Its buffer has room for at least minBinaryCap bytes, so a transport
// that tracks when it is done with a buffer only past a size (grpc-go's
// pools buffers over 1 KiB and gives them back once written) can follow
// each send of it.
func (f *Message) Binary() ([]byte, error) {
	f.binOnce.Do(func() {
		f.bin, f.binErr = proto.MarshalOptions{}.MarshalAppend(make([]byte, 0, max(proto.Size(f.msg), minBinaryCap)), f.msg)
	})
	return f.bin, f.binErr
}

const minBinaryCap = 2 << 10

func (f *Message) protoJSON() ([]byte, error) {
	f.jsonOnce.Do(func() { f.json, f.jsonErr = protojson.Marshal(f.msg) })
	return f.json, f.jsonErr
}

// Latest remembers the Message Build made for the latest key (a report):
// every stream of a fire sends the same one, so one entry suffices. Build
// is set once, so a Get on the fan-out's path allocates nothing.
type Latest[K comparable] struct {
	Build func(K) proto.Message

	mu  sync.Mutex
	key K
	msg *Message
}

// Get returns the Message for key, built the first time.
func (l *Latest[K]) Get(key K) *Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == nil || l.key != key {
		l.key, l.msg = key, NewMessage(l.Build(key))
	}
	return l.msg
}

// Unmarshal decodes a request into m, with whatever checks the service
// wants on top of the encoding's.
type Unmarshal func(b []byte, m proto.Message) error

// Options are a handler's codecs and compression: connect's "proto" and
// "json" codecs (under both of connect's names for JSON) that also send a
// *Message as its cached encoding, decoding requests with the given
// functions, and the fan-out aware gzip.
func Options(binary, json Unmarshal) connect.HandlerOption {
	return connect.WithHandlerOptions(connect.WithCodec(binaryCodec{binary}),
		connect.WithCodec(jsonCodec{"json", json}), connect.WithCodec(jsonCodec{"json; charset=utf-8", json}),
		compressionOptions())
}

// binaryCodec is connect's "proto" codec that also accepts *Message.
type binaryCodec struct{ unmarshal Unmarshal }

func (binaryCodec) Name() string { return "proto" }

func (binaryCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*Message); ok {
		b, err := f.Binary()
		// connect owns what Marshal returns and recycles it: hand out a copy.
		return append([]byte(nil), b...), err
	}
	return proto.Marshal(m.(proto.Message))
}

func (binaryCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	if f, ok := m.(*Message); ok {
		b, err := f.Binary()
		return append(dst, b...), err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m.(proto.Message))
}

func (c binaryCodec) Unmarshal(b []byte, m any) error { return c.unmarshal(b, m.(proto.Message)) }

// jsonCodec is connect's JSON codec under one of its names that also
// accepts *Message.
type jsonCodec struct {
	name      string
	unmarshal Unmarshal
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*Message); ok {
		b, err := f.protoJSON()
		return append([]byte(nil), b...), err
	}
	return protojson.Marshal(m.(proto.Message))
}

func (c jsonCodec) Unmarshal(b []byte, m any) error { return c.unmarshal(b, m.(proto.Message)) }

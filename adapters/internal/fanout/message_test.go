package fanout

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestMessageEncodedOnceAndHandedOutAsCopies: a Message's encodings equal
// protobuf's own, and what a codec hands out is a copy connect may reuse
// (it recycles what Marshal returns) without corrupting the next stream's.
func TestMessageEncodedOnceAndHandedOutAsCopies(t *testing.T) {
	t.Parallel()
	// A list, not a Struct: a map's encoding order varies between runs.
	msg, _ := structpb.NewList([]any{"rank", 7.0, "usage", 0.25})
	f := NewMessage(msg)
	want, _ := proto.Marshal(msg)
	codec := binaryCodec{}
	b1, err := codec.Marshal(f)
	if err != nil || !bytes.Equal(b1, want) {
		t.Fatalf("binary encoding differs from proto.Marshal (%v)", err)
	}
	clear(b1) // what connect may do with a buffer it was handed
	b2, _ := codec.MarshalAppend([]byte("x"), f)
	if !bytes.Equal(b2[1:], want) {
		t.Fatal("the cached encoding changed after a caller reused its copy")
	}
	j, err := jsonCodec{name: "json"}.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back := &structpb.ListValue{}
	if err := protojson.Unmarshal(j, back); err != nil || !proto.Equal(back, msg) {
		t.Fatalf("JSON encoding decodes to %v, %v", back, err)
	}
}

// TestLatestBuildsOncePerKey: the same key returns the same Message without
// building again; a new key builds anew.
func TestLatestBuildsOncePerKey(t *testing.T) {
	t.Parallel()
	builds := 0
	l := Latest[int]{Build: func(int) proto.Message { builds++; return &structpb.Struct{} }}
	a := l.Get(1)
	if l.Get(1) != a || builds != 1 {
		t.Fatalf("key 1 twice: %d builds", builds)
	}
	if l.Get(2) == a || builds != 2 {
		t.Fatalf("key 2 reused key 1's message (%d builds)", builds)
	}
}

// TestCodecsUnmarshalWithTheServicesChecks: requests decode through the
// functions the service gave, so its checks apply.
func TestCodecsUnmarshalWithTheServicesChecks(t *testing.T) {
	t.Parallel()
	refuse := errors.New("refused by the service")
	check := func([]byte, proto.Message) error { return refuse }
	if err := (binaryCodec{check}).Unmarshal(nil, &structpb.Struct{}); !errors.Is(err, refuse) {
		t.Errorf("binary: %v", err)
	}
	if err := (jsonCodec{"json", check}).Unmarshal(nil, &structpb.Struct{}); !errors.Is(err, refuse) {
		t.Errorf("json: %v", err)
	}
}

package app

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// TestZMQMaxRunningRequestsReachesTheSource: LoadStat's first five values
// (the shape in the SGLang fixtures) carry no max_running_requests, so
// without the detail pull a busy rank is valid only with
// --zmq-max-running-requests; the flag reaches the source.
func TestZMQMaxRunningRequestsReachesTheSource(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + ln.Addr().String()
	_ = ln.Close()
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	if err := pub.Listen(endpoint); err != nil {
		t.Fatal(err)
	}
	// ["LoadStat", 12, 3, 41250, 200000, 0], as the fixture's first message.
	body, _ := hex.DecodeString("96a84c6f6164537461740c03cda122ce00030d4000")

	c, err := ParseServe([]string{"--source", "sglang-zmq", "--zmq-endpoint", endpoint, "--dp-size", "1",
		"--detail-interval", "0", "--zmq-max-running-requests", "64"}, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	e, cleanup, err := NewEngine(c.Source, givenEngine{}, porttest.NewClock(time.Now()), metrics.New(time.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	src := e.Source
	var snap domain.Snapshot
	for seq := uint64(1); ; seq++ {
		if err := pub.Send(zmq4.NewMsgFrom([]byte("load"), binary.BigEndian.AppendUint64(nil, seq), body)); err != nil {
			t.Fatal(err)
		}
		if snap, err = src.Pull(context.Background()); err == nil {
			break
		}
		if seq > 500 {
			t.Fatalf("no load message heard: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := snap.Ranks[0].MaxRunningRequests; got != 64 {
		t.Fatalf("max_running_requests %d, want the flag's 64", got)
	}
	if err := domain.ValidateSnapshot(snap, domain.RankRange(1)); err != nil {
		t.Fatalf("a busy rank with the flag set: %v", err)
	}
}

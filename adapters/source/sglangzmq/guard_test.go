package sglangzmq

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// TestFrameGuardReadsEachFramesSize: the guard follows a ZMTP stream cut
// anywhere (the greeting, short and long frames, an empty one) and stops
// at the first frame announced over maxFrameBytes.
func TestFrameGuardReadsEachFramesSize(t *testing.T) {
	var stream []byte
	stream = append(stream, make([]byte, zmtpGreetingBytes)...)
	stream = append(stream, 0x04, 3, 'a', 'b', 'c') // a short command
	stream = append(stream, 0x01, 0)                // an empty frame, more to come
	stream = append(stream, zmtpFlagLong)           // a long frame at the bound
	stream = binary.BigEndian.AppendUint64(stream, maxFrameBytes)
	stream = append(stream, make([]byte, maxFrameBytes)...)
	ok := len(stream)
	stream = append(stream, zmtpFlagLong) // one byte over
	stream = binary.BigEndian.AppendUint64(stream, maxFrameBytes+1)

	for _, step := range []int{1, 7, 64, 4096, len(stream)} {
		var g frameGuard
		var err error
		at := 0
		for at < len(stream) && err == nil {
			end := min(at+step, len(stream))
			err = g.scan(stream[at:end])
			at = end
		}
		if err == nil || !strings.Contains(err.Error(), "1048577 bytes") {
			t.Errorf("reads of %d bytes: %v, want the frame over the bound refused", step, err)
		}
		if at <= ok {
			t.Errorf("reads of %d bytes: refused at byte %d, before the frame over the bound", step, at)
		}
	}
}

// TestAHugeFrameHeaderDoesNotEndTheProcess: a peer on the load port that
// completes the handshake and announces a frame of 2^62 bytes (zmq4 would
// allocate it, and panic) gets its connection closed; the source lives on,
// names the refused frame as the rank's error, and dials again at once.
func TestAHugeFrameHeaderDoesNotEndTheProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := zmq4.Open(c, null.Security(), zmq4.Pub, nil, true, nil); err != nil {
					return
				}
				hdr := binary.BigEndian.AppendUint64([]byte{zmtpFlagLong}, 1<<62)
				if _, err := c.Write(append(hdr, "a few bytes"...)); err == nil {
					select { // the source redials at once: many connections
					case sent <- struct{}{}:
					default:
					}
				}
				_, _ = c.Read(make([]byte, 1)) // until our side closes
			}()
		}
	}()
	s := start(t, Options{Endpoint: "tcp://" + ln.Addr().String(), DPSize: 1, Clock: porttest.NewClock(t0),
		ReconnectInterval: 10 * time.Millisecond, ResubscribeAfter: time.Hour})
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the hostile peer never got to send its frame header")
	}
	time.Sleep(200 * time.Millisecond) // zmq4's reader takes the header (and, unguarded, panics)
	if _, err := s.Pull(context.Background()); err == nil || !strings.Contains(domain.ErrorMessage(err), "the peer announced a ZMTP frame of 4611686018427387904 bytes") {
		t.Fatalf("Pull: %v, want the refused frame named", err)
	}
	// The source dials again at once, not after ResubscribeAfter (an
	// hour here): an engine that behaves again is heard within a
	// ReconnectInterval.
	for range 2 {
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Fatal("the source did not dial the rank again after the refused frame")
		}
	}
}

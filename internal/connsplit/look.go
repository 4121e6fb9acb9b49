package connsplit

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientPreface opens every HTTP/2 connection with prior knowledge
// (RFC 9113 §3.4).
const clientPreface = http2.ClientPreface

// errPeekLimit ends a look that would buffer more than MaxPeekBytes.
var errPeekLimit = errors.New("connsplit: MaxPeekBytes reached before the first request")

// verdict is where a look sends a connection, and why.
type verdict struct {
	grpc   bool
	h2     bool   // the client sent the HTTP/2 preface and was sent the empty SETTINGS
	reason string // for the log
}

// look reads c's first request, then hands c to GRPC() or Other(), or
// closes it when it failed or closed while being looked at.
func (s *Splitter) look(c net.Conn) {
	p := &peeker{conn: c, max: s.opt.MaxPeekBytes}
	v, err := s.sort(p)
	s.forget(c)
	log := s.opt.Logger.With("remote", c.RemoteAddr().String())
	if err == nil {
		// Hand over with no deadline of ours: the chosen server sets its
		// own.
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = c.Close()
		log.Debug("connsplit: connection closed before its first request", "error", err, "read", len(p.buf))
		return
	}
	to, name := s.other, "other"
	if v.grpc {
		to, name = s.grpc, "grpc"
	}
	if to.hand(wrap(c, p.buf, v.h2)) {
		log.Debug("connsplit: connection sorted", "to", name, "reason", v.reason, "read", len(p.buf))
	} else {
		log.Debug("connsplit: connection closed: its listener is closed", "to", name, "reason", v.reason)
	}
}

// sort reads from p until it knows where the connection goes. An error
// means the connection failed or closed and must be closed.
func (s *Splitter) sort(p *peeker) (verdict, error) {
	// A connection gets FirstBytesTimeout to show it is HTTP/2, the long
	// wait only once it is: a silent or trickling one is net/http's as
	// soon as net/http would have cut it.
	start := time.Now()
	if err := p.conn.SetDeadline(start.Add(s.opt.FirstBytesTimeout)); err != nil {
		return verdict{}, err
	}
	// The preface, byte by byte as they come: an HTTP/1 request leaves at
	// its first byte that differs.
	for len(p.buf) < len(clientPreface) {
		if err := p.fill(); err != nil {
			if v, ok := giveUp(err, false); ok {
				return v, nil
			}
			return verdict{}, err
		}
		n := min(len(p.buf), len(clientPreface))
		if !bytes.Equal(p.buf[:n], []byte(clientPreface[:n])) {
			return verdict{reason: "not the HTTP/2 preface"}, nil
		}
	}
	p.pos = len(clientPreface)
	if err := p.conn.SetDeadline(start.Add(s.opt.FirstRequestTimeout)); err != nil {
		return verdict{}, err
	}

	fr := http2.NewFramer(p.conn, p)
	// grpc-go's client sends no request before it has read the server's
	// preface: google.golang.org/grpc v1.85.0
	// internal/transport/http2_client.go, newHTTP2Client blocks on
	// readerErrCh until reader's readServerPreface has read a SETTINGS
	// frame. So the empty SETTINGS goes out now, before the first HEADERS
	// can come.
	if err := fr.WriteSettings(); err != nil {
		return verdict{}, err
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil) // the table size both ends start with (RFC 9113 §6.5.2)
	fr.MaxHeaderListSize = uint32(s.opt.MaxPeekBytes)
	fr.SetMaxReadFrameSize(uint32(s.opt.MaxPeekBytes)) // refuse a large frame before allocating for it
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if p.err != nil {
				if v, ok := giveUp(p.err, true); ok {
					return v, nil
				}
				return verdict{}, p.err
			}
			// A frame the chosen server will refuse as well: let net/http
			// answer it as HTTP/2 does.
			return verdict{h2: true, reason: "HTTP/2 protocol error: " + err.Error()}, nil
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			if nativeGRPC(h) {
				return verdict{grpc: true, h2: true, reason: "gRPC request"}, nil
			}
			return verdict{h2: true, reason: "HTTP/2 request not native gRPC"}, nil
		}
	}
}

// giveUp returns the verdict for a connection whose look ended by err
// from its reads, if it is not a failure: past FirstRequestTimeout or
// MaxPeekBytes the connection goes to Other() as it is.
func giveUp(err error, h2 bool) (verdict, bool) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return verdict{h2: h2, reason: "its time to show what it is passed"}, true
	case errors.Is(err, errPeekLimit):
		return verdict{h2: h2, reason: "MaxPeekBytes reached"}, true
	}
	return verdict{}, false
}

// nativeGRPC reports a request grpc-go's server takes as gRPC: POST with
// the content-type google.golang.org/grpc v1.85.0
// internal/grpcutil/method.go ContentSubtype accepts, "application/grpc"
// alone or followed by '+' or ';' (which leaves out
// application/grpc-web...).
func nativeGRPC(h *http2.MetaHeadersFrame) bool {
	if h.PseudoValue("method") != "POST" {
		return false
	}
	for _, f := range h.RegularFields() {
		if f.Name != "content-type" {
			continue
		}
		// Protobuf only: grpc-go's server here has one codec, and
		// net/http's (connect) also serves +json.
		ct, _, _ := strings.Cut(f.Value, ";")
		ct = strings.TrimSpace(ct)
		return ct == "application/grpc" || ct == "application/grpc+proto"
	}
	return false
}

// peeker keeps every byte read from conn while looking, and reads them
// from pos on for the Framer.
type peeker struct {
	conn net.Conn
	max  int
	buf  []byte
	pos  int
	err  error // the read error that ended the look, if any
}

// fill reads more of conn into buf.
func (p *peeker) fill() error {
	if len(p.buf) >= p.max {
		p.err = errPeekLimit
		return p.err
	}
	if len(p.buf) == cap(p.buf) {
		p.buf = append(p.buf, make([]byte, min(max(2*cap(p.buf), 512), p.max)-len(p.buf))...)[:len(p.buf)]
	}
	n, err := p.conn.Read(p.buf[len(p.buf):cap(p.buf)])
	p.buf = p.buf[:len(p.buf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		return nil
	}
	p.err = err
	return err
}

// Read gives the Framer the bytes after pos, reading more when it has
// had them all.
func (p *peeker) Read(b []byte) (int, error) {
	for p.pos == len(p.buf) {
		if err := p.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.buf[p.pos:])
	p.pos += n
	return n, nil
}

package fanout

import (
	"bytes"
	"compress/gzip"
	"io"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
)

// MinBytes is the smallest message the handlers gzip for a client that
// accepts it. A report of a few ranks is a few hundred bytes: gzip saves
// little of it and would cost more CPU per stream (≈ 12 µs) than the rest
// of its delivery.
const MinBytes = 1 << 10

// fanoutGzip is gzip with a memory of the last message it compressed.
// Every stream of a fire sends the very same bytes, and connect compresses
// per stream: with it, the first stream compresses a large report and the
// others copy that output, so a report is compressed about once per fire,
// not once per router.
type fanoutGzip struct {
	last     atomic.Pointer[gzipped]
	writers  sync.Pool // *gzip.Writer
	compress atomic.Int64
}

type gzipped struct{ in, out []byte }

func (g *fanoutGzip) newCompressor() connect.Compressor { return &fanoutCompressor{g: g} }

// gzipOptions make gzip fan-out aware: messages under MinBytes go
// uncompressed, larger ones are compressed about once per fire. Each call
// makes its own memory, so each handler has one.
func gzipOptions() connect.HandlerOption {
	g := &fanoutGzip{}
	return connect.WithHandlerOptions(
		connect.WithCompression("gzip", func() connect.Decompressor { return &gzip.Reader{} }, g.newCompressor),
		connect.WithCompressMinBytes(MinBytes))
}

// gzip compresses in, or returns what it returned for the same bytes last.
func (g *fanoutGzip) gzip(in []byte) ([]byte, error) {
	if e := g.last.Load(); e != nil && bytes.Equal(e.in, in) {
		return e.out, nil
	}
	g.compress.Add(1)
	var out bytes.Buffer
	zw, _ := g.writers.Get().(*gzip.Writer)
	if zw == nil {
		zw = gzip.NewWriter(&out)
	} else {
		zw.Reset(&out)
	}
	defer g.writers.Put(zw)
	if _, err := zw.Write(in); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	e := &gzipped{in: bytes.Clone(in), out: out.Bytes()}
	g.last.Store(e)
	return e.out, nil
}

// fanoutCompressor collects one message and writes its gzip on Close,
// which is when connect is done writing it.
type fanoutCompressor struct {
	g   *fanoutGzip
	dst io.Writer
	buf []byte
}

func (c *fanoutCompressor) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *fanoutCompressor) Reset(dst io.Writer) {
	c.dst = dst
	c.buf = c.buf[:0]
}

func (c *fanoutCompressor) Close() error {
	if c.dst == nil {
		return nil
	}
	out, err := c.g.gzip(c.buf)
	if err != nil {
		return err
	}
	_, err = c.dst.Write(out)
	c.buf = c.buf[:0]
	return err
}

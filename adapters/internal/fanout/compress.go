package fanout

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
)

// MinBytes is the smallest message the handlers compress for a client that
// accepts it. A report of a few ranks is a few hundred bytes: compression
// saves little of it and would cost more CPU per stream (≈ 12 µs) than the
// rest of its delivery.
const MinBytes = 1 << 10

// flateWriter is what gzip's and zlib's writers have in common.
type flateWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// fanoutCompression is a compression with a memory of the last message it
// compressed. Every stream of a fire sends the very same bytes, and
// connect compresses per stream: with it, the first stream compresses a
// large report and the others copy that output, so a report is compressed
// about once per fire, not once per router.
type fanoutCompression struct {
	newWriter func(io.Writer) flateWriter
	last      atomic.Pointer[compressed]
	writers   sync.Pool // flateWriter
	compress  atomic.Int64
}

type compressed struct{ in, out []byte }

func newGzip() *fanoutCompression {
	return &fanoutCompression{newWriter: func(w io.Writer) flateWriter { return gzip.NewWriter(w) }}
}

// newDeflate is gRPC's "deflate", which is the zlib format (RFC 1950):
// grpcio, among others, sends and accepts it.
func newDeflate() *fanoutCompression {
	return &fanoutCompression{newWriter: func(w io.Writer) flateWriter { return zlib.NewWriter(w) }}
}

func (g *fanoutCompression) newCompressor() connect.Compressor { return &fanoutCompressor{g: g} }

// compressionOptions make gzip and deflate fan-out aware: messages under
// MinBytes go uncompressed, larger ones are compressed about once per
// fire. Each call makes its own memories, so each handler has its own.
func compressionOptions() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCompression("gzip", func() connect.Decompressor { return &gzip.Reader{} }, newGzip().newCompressor),
		connect.WithCompression("deflate", func() connect.Decompressor { return &zlibReader{} }, newDeflate().newCompressor),
		connect.WithCompressMinBytes(MinBytes))
}

// compressed compresses in, or returns what it returned for the same bytes
// last.
func (g *fanoutCompression) compressed(in []byte) ([]byte, error) {
	if e := g.last.Load(); e != nil && bytes.Equal(e.in, in) {
		return e.out, nil
	}
	g.compress.Add(1)
	var out bytes.Buffer
	zw, _ := g.writers.Get().(flateWriter)
	if zw == nil {
		zw = g.newWriter(&out)
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
	e := &compressed{in: bytes.Clone(in), out: out.Bytes()}
	g.last.Store(e)
	return e.out, nil
}

// fanoutCompressor collects one message and writes it compressed on Close,
// which is when connect is done writing it.
type fanoutCompressor struct {
	g   *fanoutCompression
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
	out, err := c.g.compressed(c.buf)
	if err != nil {
		return err
	}
	_, err = c.dst.Write(out)
	c.buf = c.buf[:0]
	return err
}

// zlibReader is a zlib reader connect can reuse (its Reset takes a reader
// only); connect bounds what it inflates (the handlers' read limit).
type zlibReader struct{ r io.ReadCloser }

func (z *zlibReader) Read(p []byte) (int, error) {
	if z.r == nil {
		return 0, io.EOF
	}
	return z.r.Read(p)
}

func (z *zlibReader) Close() error {
	if z.r == nil {
		return nil
	}
	return z.r.Close()
}

func (z *zlibReader) Reset(src io.Reader) error {
	if z.r == nil {
		r, err := zlib.NewReader(src)
		if err != nil {
			return err
		}
		z.r = r
		return nil
	}
	return z.r.(zlib.Resetter).Reset(src, nil)
}

package fanout

import (
	"compress/gzip"
	"compress/zlib"
	"io"

	"google.golang.org/grpc/encoding"
)

// grpc-go's "gzip" and "deflate" (the zlib format, which grpc-go lacks
// and grpcio routers may use): what a client compresses is read, and a
// message several streams send alike (ORCA's, Watch's) is compressed
// once, as Options does for connect. grpc-go keeps
// one compressor per name for the whole process and wants them
// registered at init, so importing this package replaces its own gzip
// everywhere, with the same format.
func init() {
	encoding.RegisterCompressor(&grpcCompressor{name: "gzip", c: newGzip(),
		reader: func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }})
	encoding.RegisterCompressor(&grpcCompressor{name: "deflate", c: newDeflate(),
		reader: func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }})
}

// grpcCompressor is a fan-out compression as grpc-go's encoding.Compressor.
// grpc-go bounds what a decompressed message may grow to (the server's
// receive limit).
type grpcCompressor struct {
	name   string
	c      *fanoutCompression
	reader func(io.Reader) (io.Reader, error)
}

func (g *grpcCompressor) Name() string { return g.name }

func (g *grpcCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	return &fanoutCompressor{g: g.c, dst: w}, nil
}

func (g *grpcCompressor) Decompress(r io.Reader) (io.Reader, error) { return g.reader(r) }

var _ encoding.Compressor = (*grpcCompressor)(nil)

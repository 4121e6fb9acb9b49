package fanout

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"testing"
)

// TestFanoutCompressesOncePerMessage: streams sending the same bytes share
// one compression, in gzip as in deflate; other bytes are compressed anew;
// every output decompresses to its input, and connect's reader for deflate
// reads it back when reused.
func TestFanoutCompressesOncePerMessage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		g       *fanoutCompression
		inflate func(io.Reader) (io.Reader, error)
	}{
		"gzip":    {newGzip(), func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }},
		"deflate": {newDeflate(), func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }},
	} {
		t.Run(name, func(t *testing.T) {
			report := bytes.Repeat([]byte("rank 7 token_usage 0.25 "), 200)
			other := bytes.Repeat([]byte("rank 3 token_usage 0.75 "), 200)
			var outs [][]byte
			for _, in := range [][]byte{report, report, report, other, report} {
				c := tc.g.newCompressor()
				var dst bytes.Buffer
				c.Reset(&dst)
				if _, err := c.Write(in); err != nil {
					t.Fatal(err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				r, err := tc.inflate(bytes.NewReader(dst.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, in) {
					t.Fatalf("decompressed %d bytes (%v), not the %d written", len(got), err, len(in))
				}
				outs = append(outs, dst.Bytes())
			}
			if n := tc.g.compress.Load(); n != 3 {
				t.Errorf("%d compressions for report ×3, other, report: want 3 (the repeats copy)", n)
			}
			if !bytes.Equal(outs[0], outs[2]) {
				t.Error("a repeat of the same bytes went out differently")
			}
			if name != "deflate" {
				return
			}
			zr := &zlibReader{}
			for i, out := range [][]byte{outs[0], outs[3]} {
				if err := zr.Reset(bytes.NewReader(out)); err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(zr); err != nil || len(got) != len(report) {
					t.Fatalf("reused reader, message %d: %d bytes, %v", i, len(got), err)
				}
			}
		})
	}
}

package fanout

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// TestFanoutGzipCompressesOncePerMessage: streams sending the same bytes
// share one compression; other bytes are compressed anew; every output
// decompresses to its input.
func TestFanoutGzipCompressesOncePerMessage(t *testing.T) {
	g := &fanoutGzip{}
	report := bytes.Repeat([]byte("rank 7 token_usage 0.25 "), 200)
	other := bytes.Repeat([]byte("rank 3 token_usage 0.75 "), 200)
	var outs [][]byte
	for _, in := range [][]byte{report, report, report, other, report} {
		c := g.newCompressor()
		var dst bytes.Buffer
		c.Reset(&dst)
		if _, err := c.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzip(t, dst.Bytes()); !bytes.Equal(got, in) {
			t.Fatalf("decompressed %d bytes, not the %d written", len(got), len(in))
		}
		outs = append(outs, dst.Bytes())
	}
	if n := g.compress.Load(); n != 3 {
		t.Errorf("%d compressions for report ×3, other, report: want 3 (the repeats copy)", n)
	}
	if !bytes.Equal(outs[0], outs[2]) {
		t.Error("a repeat of the same bytes went out differently")
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

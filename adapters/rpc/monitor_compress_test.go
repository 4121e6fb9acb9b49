package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// TestMonitorCompressesOnlyLargeReports: a client that accepts gzip
// (connect-go's default) gets a report of a few ranks uncompressed — gzip
// would cost more than the rest of its delivery — and a report of
// thousands of ranks compressed; both decode to the report sent.
func TestMonitorCompressesOnlyLargeReports(t *testing.T) {
	t.Parallel()
	for _, p := range clientProtocols {
		t.Run(p.name, func(t *testing.T) {
			reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16)}
			var wire capture
			srv := serveMounted(t, func(o ...connect.HandlerOption) (string, http.Handler) {
				route, h := mustMonitor(t, reg, MonitorOptions{}).Handler(o...)
				return route, wire.around(h)
			}, true)
			client := loadmonitorv1connect.NewLoadMonitorServiceClient(srv.Client(), srv.URL, p.opts...)
			ctx, cancel := context.WithCancel(testContext(t))
			m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: reg.sess, st: client.Monitor(ctx)}
			defer func() { cancel(); _ = m.st.CloseResponse() }()
			m.register()
			for _, rep := range []*domain.Report{sampleReport(), hugeReport()} {
				m.deliver(rep)
				if got := m.recv().GetReport(); !proto.Equal(got, ReportToProto(rep)) {
					t.Fatalf("a report of %d ranks did not arrive intact", len(rep.Ranks))
				}
			}
			flags := wire.flags(t, 3) // the ack, the small report, the huge one
			if flags[0]&1 != 0 || flags[1]&1 != 0 {
				t.Errorf("the ack or a report of %d rank(s) went out compressed (flags %v)", len(sampleReport().Ranks), flags)
			}
			if flags[2]&1 == 0 {
				t.Errorf("a report of %d ranks went out uncompressed (flags %v)", len(hugeReport().Ranks), flags)
			}
		})
	}
}

// capture records the bytes a handler writes.
type capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capture) around(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&captureWriter{ResponseWriter: w, c: c}, r)
	})
}

// flags returns the flag bytes of the first n envelopes written.
func (c *capture) flags(t *testing.T, n int) []byte {
	t.Helper()
	c.mu.Lock()
	b := bytes.Clone(c.buf.Bytes())
	c.mu.Unlock()
	var out []byte
	for len(out) < n {
		if len(b) < 5 {
			t.Fatalf("only %d envelopes written, want %d", len(out), n)
		}
		size := int(binary.BigEndian.Uint32(b[1:5]))
		out = append(out, b[0])
		b = b[min(len(b), 5+size):]
	}
	return out
}

type captureWriter struct {
	http.ResponseWriter
	c *capture
}

func (w *captureWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.c.buf.Write(p)
	w.c.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *captureWriter) Flush()                      { w.ResponseWriter.(http.Flusher).Flush() }
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

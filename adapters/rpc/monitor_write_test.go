package rpc

import (
	"bytes"
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// monitorGoroutines counts the goroutines running Monitor's code.
func monitorGoroutines() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		for _, fn := range []string{"rpc.(*Monitor).", "rpc.(*receiver).", "rpc.(*writer)."} {
			if strings.Contains(g, fn) {
				n++
				break
			}
		}
	}
	return n
}

// TestMonitorStreamHoldsOneGoroutine: a registered router between reports
// costs its stream one goroutine, the handler's, which reads the router's
// frames; a report is written by a goroutine that lives only while it is
// sent. It runs alone (no t.Parallel): it counts the process's monitor
// goroutines.
func TestMonitorStreamHoldsOneGoroutine(t *testing.T) {
	for _, p := range clientProtocols {
		t.Run(p.name, func(t *testing.T) {
			reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16)}
			srv := serveMounted(t, mustMonitor(t, reg, MonitorOptions{}).Handler, true)
			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			client := loadmonitorv1connect.NewLoadMonitorServiceClient(srv.Client(), srv.URL, p.opts...)
			m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: reg.sess, st: client.Monitor(ctx)}
			defer func() { _ = m.st.CloseResponse() }()
			m.register()
			for range 3 {
				m.livesOn()
			}
			m.send(keepAliveFrame)
			m.wait(m.sess.calls, "keep_alive")
			for n := monitorGoroutines(); n != 1; n = monitorGoroutines() {
				select {
				case <-m.ctx.Done():
					t.Fatalf("an idle registered stream holds %d goroutines, want 1", n)
				case <-time.After(time.Millisecond):
				}
			}
			m.sess.end(nil)
			m.endsOK()
		})
	}
}

// TestWriterFinishesOnce: the pump and a drain may both find a native
// stream over (its frame in flight past the deadline, its session ended);
// the first ending is the stream's, and the second is no panic.
func TestWriterFinishesOnce(t *testing.T) {
	t.Parallel()
	w := newWriter(nil, nil, nil, "r1", newFakeSession("r1"), nil, nil)
	first, second := errors.New("the router took no frame"), errors.New("the session ended")
	w.finish(first)
	w.finish(second)
	select {
	case <-w.finishedChan():
	default:
		t.Fatal("finished is still open")
	}
	if w.result != first {
		t.Fatalf("result %v, want the first ending's %v", w.result, first)
	}
}

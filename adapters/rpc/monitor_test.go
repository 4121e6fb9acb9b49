package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

func int64p(v int64) *int64 { return &v }

func TestMonitorRegisterAck(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		m.send(stopFrame)
		m.endsOK()
		m.waitClosed()
	})
}

func TestMonitorFirstFrameNotRegister(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		frame *pb.RouterFrame
	}{
		{"keep_alive", keepAliveFrame},
		{"update_config", updateFrame(int64p(200), nil)},
		{"stop", stopFrame},
		{"an empty frame", emptyFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachProtocol(t, nil, func(m *monitorTest) {
				m.send(c.frame)
				e := m.endsWith(domain.CodeInvalidFirstFrame)
				if !strings.Contains(e.GetMessage(), c.name) {
					t.Errorf("message %q does not name %s", e.GetMessage(), c.name)
				}
				m.noCalls()
			})
		})
	}
}

// TestMonitorRegisterRefused: a registration the core refuses ends the
// stream with the core's code and message; no session was started.
func TestMonitorRegisterRefused(t *testing.T) {
	t.Parallel()
	for _, code := range []string{domain.CodeInvalidArgument, domain.CodeResourceExhausted, domain.CodeShuttingDown} {
		t.Run(code, func(t *testing.T) {
			refused := domain.Errorf(code, "refused with %s", code)
			eachProtocol(t, func(r *fakeRegistrar) { r.err = refused }, func(m *monitorTest) {
				m.send(registerFrame("", 100, 3000))
				if e := m.endsWith(code); e.GetMessage() != refused.Message {
					t.Errorf("message %q, want %q", e.GetMessage(), refused.Message)
				}
				m.wait(m.reg.calls, "register  100 3000")
				m.noCalls()
			})
		})
	}
}

func TestMonitorKeepAlive(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		m.send(keepAliveFrame)
		m.wait(m.sess.calls, "keep_alive")
		m.livesOn()
		m.send(stopFrame)
		m.endsOK()
	})
}

// TestMonitorUpdateConfig: a valid update_config keeps the stream; an
// invalid one ends it with INVALID_ARGUMENT; one that finds the session
// already ended is left to Done to report.
func TestMonitorUpdateConfig(t *testing.T) {
	t.Parallel()
	t.Run("valid", func(t *testing.T) {
		eachProtocol(t, nil, func(m *monitorTest) {
			m.register()
			m.send(updateFrame(int64p(200), nil))
			m.wait(m.sess.calls, "update 200 -")
			m.send(updateFrame(nil, int64p(5000)))
			m.wait(m.sess.calls, "update - 5000")
			m.livesOn()
			m.send(stopFrame)
			m.endsOK()
		})
	})
	t.Run("invalid", func(t *testing.T) {
		invalid := domain.Errorf(domain.CodeInvalidArgument, "report_interval_ms 1: want 10 to 60000")
		eachProtocol(t, func(r *fakeRegistrar) {
			r.sess.update = func(*int64, *int64) (session.Config, error) { return testConfig, invalid }
		}, func(m *monitorTest) {
			m.register()
			m.send(updateFrame(int64p(1), nil))
			if e := m.endsWith(domain.CodeInvalidArgument); e.GetMessage() != invalid.Message {
				t.Errorf("message %q, want %q", e.GetMessage(), invalid.Message)
			}
			m.wait(m.sess.calls, "update 1 -")
			m.waitClosed()
		})
	})
	t.Run("session already ended", func(t *testing.T) {
		eachProtocol(t, func(r *fakeRegistrar) {
			r.sess.update = func(*int64, *int64) (session.Config, error) {
				return session.Config{}, domain.Errorf(domain.CodeNotFound, "the session has ended")
			}
		}, func(m *monitorTest) {
			m.register()
			m.send(updateFrame(int64p(200), nil))
			m.wait(m.sess.calls, "update 200 -")
			m.send(keepAliveFrame) // the receiver still reads
			m.wait(m.sess.calls, "keep_alive")
			m.livesOn()
			m.sess.end(domain.Errorf(domain.CodeReplaced, "replaced"))
			m.endsWith(domain.CodeReplaced)
		})
	})
}

// TestMonitorSecondRegister: a second register is a full config update of
// the same router; the core refuses another router_id, which ends the
// stream.
func TestMonitorSecondRegister(t *testing.T) {
	t.Parallel()
	t.Run("same router_id", func(t *testing.T) {
		eachProtocol(t, nil, func(m *monitorTest) {
			m.register()
			m.send(registerFrame("r1", 200, 5000))
			m.wait(m.sess.calls, "reregister r1 200 5000")
			m.send(keepAliveFrame)
			m.wait(m.sess.calls, "keep_alive")
			m.livesOn()
			m.send(stopFrame)
			m.endsOK()
		})
	})
	t.Run("different router_id", func(t *testing.T) {
		eachProtocol(t, func(r *fakeRegistrar) {
			r.sess.reregister = func(id string, _, _ int64) (session.Config, error) {
				return testConfig, domain.Errorf(domain.CodeInvalidArgument, "router_id %q differs from %q", id, "r1")
			}
		}, func(m *monitorTest) {
			m.register()
			m.send(registerFrame("r2", 100, 3000))
			e := m.endsWith(domain.CodeInvalidArgument)
			if !strings.Contains(e.GetMessage(), `"r2"`) {
				t.Errorf("message %q does not name r2", e.GetMessage())
			}
			m.wait(m.sess.calls, "reregister r2 100 3000")
			m.waitClosed()
			m.noCalls()
		})
	})
}

func TestMonitorStop(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		m.send(stopFrame)
		m.endsOK()
		m.waitClosed()
		m.noCalls()
	})
}

func TestMonitorEmptyFrame(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		m.send(emptyFrame)
		if e := m.endsWith(domain.CodeInvalidArgument); !strings.Contains(e.GetMessage(), "no payload") {
			t.Errorf("message %q, want it to say the frame has no payload", e.GetMessage())
		}
		m.waitClosed()
	})
}

// TestMonitorHalfClose: a router that half-closes can no longer renew, but
// its session lives and keeps reporting until the lease runs out.
func TestMonitorHalfClose(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		if err := m.st.CloseRequest(); err != nil {
			t.Fatal(err)
		}
		rep := sampleReport()
		m.deliver(rep)
		if got := m.recv().GetReport(); !proto.Equal(got, ReportToProto(rep)) {
			t.Fatalf("after half-close got report %v, want %v", got, ReportToProto(rep))
		}
		m.sess.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within 3s"))
		m.endsWith(domain.CodeLeaseExpired)
		m.waitClosed()
	})
}

// TestMonitorSessionEnds: however the core ends a session, the router gets
// its code and message in the last frame and the stream ends with OK.
func TestMonitorSessionEnds(t *testing.T) {
	t.Parallel()
	for _, code := range []string{domain.CodeLeaseExpired, domain.CodeReplaced, domain.CodeShuttingDown, domain.CodeResourceExhausted} {
		t.Run(code, func(t *testing.T) {
			eachProtocol(t, nil, func(m *monitorTest) {
				m.register()
				reason := domain.Errorf(code, "ended with %s", code)
				m.sess.end(reason)
				if e := m.endsWith(code); e.GetMessage() != reason.Message {
					t.Errorf("message %q, want %q", e.GetMessage(), reason.Message)
				}
				m.waitClosed()
			})
		})
	}
}

func TestMonitorClosedBeforeAnyFrame(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		if err := m.st.CloseRequest(); err != nil {
			t.Fatal(err)
		}
		m.endsOK()
		m.noCalls()
	})
}

func TestMonitorReport(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		for seq := range uint64(3) {
			rep := sampleReport()
			rep.SequenceID = seq
			m.deliver(rep)
			if got := m.recv().GetReport(); !proto.Equal(got, ReportToProto(rep)) {
				t.Fatalf("got report %v, want %v", got, ReportToProto(rep))
			}
		}
		m.send(stopFrame)
		m.endsOK()
	})
}

// TestMonitorContextCancelled: a router that goes away ends its session.
func TestMonitorContextCancelled(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		m.register()
		m.cancel()
		_, err := m.st.Receive()
		if connect.CodeOf(err) != connect.CodeCanceled || !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel the client read %v, want Canceled", err)
		}
		m.waitClosed()
	})
}

// livesOn checks the stream still carries reports.
func (m *monitorTest) livesOn() {
	m.t.Helper()
	rep := sampleReport()
	m.deliver(rep)
	if got := m.recv().GetReport(); !proto.Equal(got, ReportToProto(rep)) {
		m.t.Fatalf("got report %v, want %v", got, ReportToProto(rep))
	}
}

// deliver hands rep to the handler as the session's next report.
func (m *monitorTest) deliver(rep *domain.Report) {
	m.t.Helper()
	select {
	case m.sess.reports <- rep:
		m.sess.wake()
	case <-m.ctx.Done():
		m.t.Fatalf("the handler never took the report before: %v", m.ctx.Err())
	}
}

// TestMonitorAckPrecedesAnEndSentRightBehindRegister: a router that sends
// stop, or a frame that ends the stream, right behind its register (no
// wait for the ack, as a grpcurl here-document does) still gets the ack
// first (SPEC §2.3), then the stream's end. Repeated: the writer's first
// drain and the handler's read of the second frame race.
func TestMonitorAckPrecedesAnEndSentRightBehindRegister(t *testing.T) {
	t.Parallel()
	invalid := domain.Errorf(domain.CodeInvalidArgument, "report_interval_ms 1: want 10 to 60000")
	for _, tc := range []struct {
		name   string
		second *pb.RouterFrame
		code   string // "" ends with status OK
	}{
		{"stop", stopFrame, ""},
		{"an invalid update_config", updateFrame(int64p(1), nil), domain.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				eachProtocol(t, func(r *fakeRegistrar) {
					r.sess.update = func(*int64, *int64) (session.Config, error) { return testConfig, invalid }
				}, func(m *monitorTest) {
					m.send(registerFrame("r1", 100, 3000))
					m.send(tc.second)
					if ack := m.recv().GetRegistered(); ack == nil {
						m.t.Fatal("the first frame is not the registered ack")
					}
					if tc.code == "" {
						m.endsOK()
					} else {
						m.endsWith(tc.code)
					}
				})
			}
		})
	}
}

// TestMonitorRegisterThatDoesNotDecode: a register whose router_id is not
// UTF-8 (proto3 strings must be) is a bad register, INVALID_ARGUMENT
// (SPEC §2.2), not a first frame of the wrong kind; another frame that
// does not decode first is still INVALID_FIRST_FRAME.
func TestMonitorRegisterThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	badID := protowire.AppendTag(nil, 1, protowire.BytesType) // RegisterRequest.router_id
	badID = protowire.AppendString(badID, "r\xff1")
	register := protowire.AppendTag(nil, 1, protowire.BytesType) // RouterFrame.register
	register = protowire.AppendBytes(register, badID)
	update := protowire.AppendTag(nil, 2, protowire.BytesType) // RouterFrame.update_config
	update = protowire.AppendBytes(update, []byte{0x08})       // a truncated varint
	srv := serve(t, mustMonitor(t, &fakeRegistrar{}, MonitorOptions{}).Handler)
	for _, p := range clientProtocols {
		for _, tc := range []struct {
			name  string
			frame []byte
			code  string
		}{
			{"register", register, domain.CodeInvalidArgument},
			{"update_config", update, domain.CodeInvalidFirstFrame},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				client := connect.NewClient[rawFrame, pb.WorkerFrame](srv.Client(),
					srv.URL+loadmonitorv1connect.LoadMonitorServiceMonitorProcedure,
					append([]connect.ClientOption{connect.WithCodec(rawCodec{})}, p.opts...)...)
				st := client.CallBidiStream(testContext(t))
				if err := st.Send(&rawFrame{tc.frame}); err != nil {
					t.Fatal(err)
				}
				f, err := st.Receive()
				if err != nil || f.GetError().GetCode() != tc.code {
					t.Fatalf("got %v (%v), want a StreamError %s", f, err, tc.code)
				}
				if tc.name == "register" && !strings.Contains(f.GetError().GetMessage(), "UTF-8") {
					t.Errorf("message %q does not say what is wrong", f.GetError().GetMessage())
				}
			})
		}
	}
}

// TestMonitorAReportWaitingAtRegistrationFollowsTheAck: a joining router's
// first report is often offered before its writer is attached, and one
// kick then stands for the ack and the report; the report must follow the
// ack at once, not wait for the next fire's offer.
func TestMonitorAReportWaitingAtRegistrationFollowsTheAck(t *testing.T) {
	t.Parallel()
	eachProtocol(t, nil, func(m *monitorTest) {
		rep := sampleReport()
		m.sess.reports <- rep // no writer to notify yet
		m.register()
		got := make(chan *pb.WorkerFrame, 1)
		go func() {
			if f, err := m.st.Receive(); err == nil {
				got <- f
			}
		}()
		select {
		case f := <-got:
			if !proto.Equal(f.GetReport(), ReportToProto(rep)) {
				t.Fatalf("after the ack: %v, want the report that waited", f)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the report waiting at registration was not sent within 5 s of the ack")
		}
		m.send(stopFrame)
		m.endsOK()
	})
}

package rpc

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/internal/connectcode"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

// DefaultWatchInterval is the cadence of a Watch that asks for none.
const DefaultWatchInterval = time.Second

// Subscriber starts sessions of any kind; *fireloop.Loop implements it.
type Subscriber interface {
	Subscribe(session.Options) (*fireloop.Subscription, error)
	Count(session.Kind) int
	Limits() session.Limits
}

// Watch serves loadreporter.v1.WatchService: live reports for browsers,
// as a session kind of its own in the fire loop.
type Watch struct {
	sub Subscriber
}

var _ loadreporterv1connect.WatchServiceHandler = (*Watch)(nil)

// NewWatch returns the Watch service over sub.
func NewWatch(sub Subscriber) *Watch { return &Watch{sub: sub} }

// Handler returns the route and handler to mount on the shared mux.
func (w *Watch) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{codecOptions()}, opts...)
	return loadreporterv1connect.NewWatchServiceHandler(w, opts...)
}

// Watch streams one response per due deadline until the caller goes away
// or the reporter shuts down.
func (w *Watch) Watch(ctx context.Context, req *connect.Request[lrv1.WatchRequest], st *connect.ServerStream[lrv1.WatchResponse]) error {
	ms := req.Msg.GetReportIntervalMs()
	if ms == 0 {
		ms = DefaultWatchInterval.Milliseconds()
	}
	interval, err := w.sub.Limits().Interval(ms)
	if err != nil {
		return connectcode.ToConnect(err)
	}
	sub, err := w.sub.Subscribe(session.Options{
		Kind: session.KindWatch, Name: "watch " + req.Peer().Addr,
		Config: session.Config{Interval: interval}, NoLease: true,
	})
	if err != nil {
		return connectcode.ToConnect(err)
	}
	defer sub.Close()
	for {
		select {
		case rep := <-sub.Reports():
			err := st.Send(&lrv1.WatchResponse{
				Report:           ReportToProto(rep),
				RoutersConnected: int32(w.sub.Count(session.KindMonitor)),
			})
			if err != nil {
				return err
			}
		case <-sub.Done():
			return connectcode.ToConnect(sub.Err())
		case <-ctx.Done():
			return nil
		}
	}
}

package client

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	f := freshness{staleAfter: 3 * time.Second, maxSnapshotAge: 10 * time.Second}
	stale := healthy("a", 1, 1)
	stale.Status, stale.LastError = pb.ReportStatus_REPORT_STATUS_STALE, new("load snapshot stale by 4000 ms")
	old := healthy("a", 1, 2)
	old.Ranks[1].SnapshotTimeUnixMs = t0.Add(-11 * time.Second).UnixMilli()
	noStamp := healthy("a", 1, 1)
	noStamp.Ranks[0].SnapshotTimeUnixMs = 0
	oldBehindNoStamp := healthy("a", 1, 2)
	oldBehindNoStamp.Ranks[0].SnapshotTimeUnixMs = 0
	oldBehindNoStamp.Ranks[1].SnapshotTimeUnixMs = t0.Add(-60 * time.Second).UnixMilli()
	cases := []struct {
		name      string
		connected bool
		r         *pb.LoadReport
		now       time.Time
		want      State
		reason    string
	}{
		{"no stream", false, healthy("a", 1, 1), t0, Disconnected, "no registered stream"},
		{"no report yet", true, nil, t0, Stale, "no report yet"},
		{"fresh", true, healthy("a", 1, 1), t0, Fresh, ""},
		{"exactly at the bound is fresh", true, healthy("a", 1, 1), t0.Add(3 * time.Second), Fresh, ""},
		{"past the bound is stale", true, healthy("a", 1, 1), t0.Add(3*time.Second + 1), Stale, "no report for"},
		{"worker says stale", true, stale, t0, Stale, "worker reports STALE: load snapshot stale"},
		{"worker says unreachable", true, unreachable("a", 1), t0, Unreachable, "pull timed out"},
		{"unreachable beats silence", true, unreachable("a", 1), t0.Add(time.Hour), Unreachable, "UNREACHABLE"},
		{"old snapshot", true, old, t0, Stale, "snapshot was 11s old"},
		{"no timestamp", true, noStamp, t0, Fresh, ""},
		{"a rank without a stamp hides no older rank", true, oldBehindNoStamp, t0, Stale, "snapshot was 1m0s old"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := judge(c.connected, c.r, t0, c.now, f)
			if got != c.want || !strings.Contains(reason, c.reason) {
				t.Fatalf("got %v %q, want %v containing %q", got, reason, c.want, c.reason)
			}
		})
	}
	t.Run("snapshot bound off", func(t *testing.T) {
		if got, _ := judge(true, old, t0, t0, freshness{staleAfter: time.Second, maxSnapshotAge: -1}); got != Fresh {
			t.Fatalf("got %v", got)
		}
	})
}

func TestStateAt(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(100, 0)
	v := &View{State: Fresh, StaleAt: t0}
	if v.StateAt(t0) != Fresh || v.StateAt(t0.Add(1)) != Stale {
		t.Fatal("a Fresh view turns Stale strictly after StaleAt")
	}
	u := &View{State: Unreachable, StaleAt: t0}
	if u.StateAt(t0.Add(time.Hour)) != Unreachable {
		t.Fatal("only Fresh views age")
	}
	var none *View
	if none.StateAt(t0) != Disconnected {
		t.Fatal("no view is Disconnected")
	}
	for _, s := range states {
		if strings.HasPrefix(s.String(), "State(") {
			t.Fatalf("%d has no name", int(s))
		}
	}
}

// A slow subscriber holds only the latest view; publishing never blocks.
func TestSubscribersLatestWins(t *testing.T) {
	t.Parallel()
	var s latest[*View]
	first := &View{Addr: "first"}
	slow, cancelSlow := s.add(func() (*View, bool) { return first, true })
	defer cancelSlow()
	var last *View
	for i := range 1000 {
		last = &View{Addr: "v", PublishedAt: time.Unix(int64(i), 0)}
		s.publish(last)
	}
	if got := <-slow; got != last {
		t.Fatalf("got %v, want the latest", got.PublishedAt)
	}
	select {
	case v := <-slow:
		t.Fatalf("an older view was kept: %v", v)
	default:
	}
	cancelSlow()
	cancelSlow() // idempotent
	if _, ok := <-slow; ok {
		t.Fatal("cancel closes the channel")
	}
	other, cancelOther := s.add(func() (*View, bool) { return nil, false })
	defer cancelOther()
	s.close()
	if _, ok := <-other; ok {
		t.Fatal("close closes every channel")
	}
	late, cancelLate := s.add(func() (*View, bool) { return last, true })
	defer cancelLate()
	if v, ok := <-late; !ok || v != last {
		t.Fatal("a subscription after close gets the last view")
	}
	if _, ok := <-late; ok {
		t.Fatal("and then a closed channel")
	}
}

// A view published while a subscription is being made reaches it: the
// current view is read under the lock publish takes.
func TestSubscribeLosesNoConcurrentView(t *testing.T) {
	t.Parallel()
	var s latest[*View]
	v1, v2 := &View{Addr: "v1"}, &View{Addr: "v2"}
	var current atomic.Pointer[View]
	current.Store(v1)
	published := make(chan struct{})
	ch, cancel := s.add(func() (*View, bool) {
		cur := current.Load()
		go func() { // a publisher racing the subscription
			defer close(published)
			current.Store(v2)
			s.publish(v2)
		}()
		return cur, true
	})
	defer cancel()
	<-published
	if got := <-ch; got != v2 {
		t.Fatalf("subscriber holds %s, want the view published meanwhile", got.Addr)
	}
}

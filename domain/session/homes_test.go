package session

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// fanOut opens n routers at interval whose streams arrive round robin
// over conns connections (conns 0: none known), as a fleet's routers and
// the benchmark's open them, and returns the table, its sessions, and how
// many connections one fire of each slot writes to, summed over the
// slots: the writes an interval costs.
func fanOut(t *testing.T, n, conns int, interval time.Duration) (*Table, []*Session, int) {
	t.Helper()
	epoch := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tbl := NewTable(Limits{MaxSessions: 20000, MaxWatchSessions: 1, MinInterval: time.Millisecond, MaxInterval: time.Minute, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: AutoPhaseSlots}, epoch)
	var sessions []*Session
	for i := range n {
		o := Options{Kind: KindMonitor, Name: fmt.Sprint("r", i), Config: Config{Interval: interval, Lease: time.Minute}}
		if conns > 0 {
			o.Conn = fmt.Sprintf("10.0.0.1:%d", 40000+i%conns)
		}
		s, _, err := tbl.Add(o, epoch)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	return tbl, sessions, writesPerInterval(sessions, conns)
}

func writesPerInterval(sessions []*Session, conns int) int {
	if conns == 0 {
		return 0
	}
	touched := map[[2]int]bool{}
	for i, s := range sessions {
		touched[[2]int{s.Slot(), i % conns}] = true
	}
	return len(touched)
}

// A connection's routers share a phase where they can, so an interval's
// fires write to far fewer connections than placing each router alone
// (which writes to every connection in every phase), while the phases
// stay as full as before: the ten phases of 1 000 routers hold a hundred
// each whatever the connections, and a single connection fills them in
// the same order as unknown ones.
func TestAConnectionsRoutersShareAPhase(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n, conns   int
		interval   time.Duration
		maxWrites  int // alone: n/AutoPhaseSessions phases × min(conns, AutoPhaseSessions)
		aloneWrite int
	}{
		{1000, 1, 100 * time.Millisecond, 10, 10},
		{1000, 10, 100 * time.Millisecond, 40, 100},
		{10000, 100, time.Second, 250, 1000},
		{1000, 1000, 100 * time.Millisecond, 1000, 1000},
	}
	for _, c := range cases {
		tbl, _, writes := fanOut(t, c.n, c.conns, c.interval)
		if writes > c.maxWrites {
			t.Errorf("%d routers over %d connections: one interval's fires write to %d connections, want at most %d (each router placed alone: %d)",
				c.n, c.conns, writes, c.maxWrites, c.aloneWrite)
		}
		loads := tbl.SlotLoads()
		lo, hi := slices.Min(loads), slices.Max(loads)
		if lo < c.n/AutoPhases-homeSlack || hi > c.n/AutoPhases+homeSlack {
			t.Errorf("%d routers over %d connections: phases hold %v, want each within %d of %d", c.n, c.conns, loads, homeSlack, c.n/AutoPhases)
		}
		t.Logf("%d routers over %d connections: %d writes an interval, phases %v", c.n, c.conns, writes, loads)
	}
	one, _, _ := fanOut(t, 250, 1, 100*time.Millisecond)
	none, _, _ := fanOut(t, 250, 0, 100*time.Millisecond)
	if !slices.Equal(one.SlotLoads(), none.SlotLoads()) {
		t.Errorf("250 routers on one connection fill %v, unknown connections %v: want the same order", one.SlotLoads(), none.SlotLoads())
	}
}

// Homes go with their connections' last routers, and a router that
// leaves and comes back on its connection finds its home again.
func TestHomesGoWithTheirConnectionsRouters(t *testing.T) {
	t.Parallel()
	tbl, sessions, _ := fanOut(t, 300, 3, 100*time.Millisecond)
	if len(tbl.homes) != 3 {
		t.Fatalf("%d homes for 3 connections", len(tbl.homes))
	}
	for _, s := range sessions {
		tbl.Remove(s, nil)
	}
	if len(tbl.homes) != 0 || len(tbl.homed) != 0 || len(tbl.placed) != 0 {
		t.Errorf("after every router left: %d homes, %d intervals homed, %d placed; want none", len(tbl.homes), len(tbl.homed), len(tbl.placed))
	}
}

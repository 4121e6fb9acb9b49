package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// With 4 phase slots, sessions fill the least-loaded slot and, after their
// first report, each session's deadlines lie on epoch + slot·interval/4 +
// k·interval: four fires per interval, each serving its own quarter.
func TestPhaseSlotsSpreadSessionsOverTheInterval(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned, PhaseSlots: 4}, epoch)
	var ss []*Session
	for i := range 8 {
		ss = append(ss, mustAdd(t, tb, monitor(fmt.Sprint("r", i), 100*time.Millisecond, time.Minute), ms(0)))
	}
	for i, s := range ss {
		if s.Slot() != i%4 {
			t.Fatalf("session %d in slot %d, want %d (least loaded first)", i, s.Slot(), i%4)
		}
	}
	// Everyone's first report comes from the fire at 0; the next deadline
	// is the first point of the session's own grid ≥ 50 ms later: slots 2
	// and 3 start their grids at 50 and 75, so they come round before 100.
	tb.Deliver(report(1), ms(0))
	nextBySlot := []int{100, 125, 50, 75}
	for i, s := range ss {
		if want := ms(nextBySlot[s.Slot()]); !s.Next().Equal(want) {
			t.Fatalf("session %d (slot %d): next %v, want %v", i, s.Slot(), s.Next().Sub(epoch), want.Sub(epoch))
		}
	}
	var fires []string
	for now := ms(1); now.Before(ms(300)); now = now.Add(time.Millisecond) {
		if !tb.Sweep(now).Due {
			continue
		}
		d, _ := tb.Deliver(report(2), now)
		fires = append(fires, fmt.Sprintf("%v:%d", now.Sub(epoch), d[KindMonitor]))
	}
	want := []string{"50ms:2", "75ms:2", "100ms:2", "125ms:2", "150ms:2", "175ms:2",
		"200ms:2", "225ms:2", "250ms:2", "275ms:2"}
	if !slices.Equal(fires, want) {
		t.Fatalf("fires %v, want %v", fires, want)
	}
	for i, s := range ss {
		if off := s.Next().Sub(epoch) % (100 * time.Millisecond); off != time.Duration(s.Slot())*25*time.Millisecond {
			t.Fatalf("session %d: deadline %v is off its slot's phase (%v)", i, s.Next().Sub(epoch), off)
		}
	}
}

// A session keeps its slot for life; a freed slot is the next one filled,
// and one-shot sessions never take a slot.
func TestPhaseSlotsStayBalancedUnderChurn(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned, PhaseSlots: 3}, epoch)
	a := mustAdd(t, tb, monitor("a", time.Second, time.Minute), ms(0))
	b := mustAdd(t, tb, monitor("b", time.Second, time.Minute), ms(0))
	mustAdd(t, tb, monitor("c", time.Second, time.Minute), ms(0))
	mustAdd(t, tb, Options{Kind: KindPoll, Config: Config{Interval: time.Second}, NoLease: true, OneShot: true}, ms(0))
	if got := tb.SlotLoads(); !slices.Equal(got, []int{1, 1, 1}) {
		t.Fatalf("slot loads %v, want [1 1 1] (the poll holds none)", got)
	}
	tb.Remove(b, nil)
	d := mustAdd(t, tb, monitor("d", time.Second, time.Minute), ms(10))
	if d.Slot() != 1 {
		t.Fatalf("d took slot %d, want b's freed slot 1", d.Slot())
	}
	// A replacement frees the old session's slot before taking one.
	a2, replaced, err := tb.Add(monitor("a", time.Second, time.Minute), ms(20))
	if err != nil || replaced != a || a2.Slot() != 0 {
		t.Fatalf("replacement: slot %d, replaced %v, err %v", a2.Slot(), replaced == a, err)
	}
	tb.Deliver(report(1), ms(20)) // every poll is served and gone
	if got := tb.SlotLoads(); !slices.Equal(got, []int{1, 1, 1}) {
		t.Fatalf("slot loads %v after churn, want [1 1 1]", got)
	}
}

// update_config moves the deadline onto the session's own phase of the new
// interval.
func TestPhaseSlotsUpdateKeepsThePhase(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned, PhaseSlots: 2}, epoch)
	mustAdd(t, tb, monitor("a", 100*time.Millisecond, time.Minute), ms(0))
	b := mustAdd(t, tb, monitor("b", 100*time.Millisecond, time.Minute), ms(0))
	tb.Deliver(report(1), ms(0))
	if !tb.Update(b, Config{Interval: time.Second, Lease: time.Minute}, ms(130), true) {
		t.Fatal("update refused")
	}
	// Slot 1 of 2 at 1 s: grid 500 + k·1000; first point ≥ 130+500 is 1500.
	if !b.Next().Equal(ms(1500)) {
		t.Fatalf("next %v, want 1.5s", b.Next().Sub(epoch))
	}
}

func TestGridValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		g    Grid
		want string // "" valid, else a part of the error
	}{
		{Grid{Schedule: Aligned}, ""},
		{Grid{Schedule: Anchored, PhaseSlots: 1}, ""},
		{Grid{Schedule: Aligned, PhaseSlots: MaxPhaseSlots}, ""},
		{Grid{Schedule: Aligned, PhaseSlots: AutoPhaseSlots}, ""},
		{Grid{Schedule: Anchored, PhaseSlots: AutoPhaseSlots}, ""},
		{Grid{Schedule: Aligned, PhaseSlots: -2}, "phase-slots -2: must be in [1, 100]"},
		{Grid{Schedule: Aligned, PhaseSlots: MaxPhaseSlots + 1}, "phase-slots 101:"},
		{Grid{Schedule: Anchored, PhaseSlots: 4}, "needs the aligned schedule"},
	} {
		err := c.g.Validate()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.g, err, c.want)
		}
	}
}

// TestAutoPhasesOpenAsSessionsCome: under AutoPhaseSessions sessions one
// phase (the single grid); each further hundred opens the next phase in
// spreading order (0, 5, 2, 7, … of ten); sessions keep their slot, and a
// phase emptied by leavers is filled again first; with every phase full,
// the least loaded. The anchored schedule keeps one grid.
func TestAutoPhasesOpenAsSessionsCome(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tbl := NewTable(Limits{MaxSessions: 5000, MaxWatchSessions: 1, MinInterval: time.Millisecond, MaxInterval: time.Minute, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: AutoPhaseSlots}, epoch)
	add := func(i int) *Session {
		s, _, err := tbl.Add(Options{Kind: KindMonitor, Name: fmt.Sprint("r", i), Config: Config{Interval: 100 * time.Millisecond, Lease: time.Minute}}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The history's session takes no router's room.
	if _, _, err := tbl.Add(Options{Kind: KindHistory, Name: "history", Config: Config{Interval: time.Second}, NoLease: true}, epoch); err != nil {
		t.Fatal(err)
	}
	var sessions []*Session
	for i := range 100 {
		sessions = append(sessions, add(i))
	}
	if loads := tbl.SlotLoads(); loads[0] != 101 || len(loads) != AutoPhases {
		t.Fatalf("the history and 100 routers: %v, want all in phase 0 of %d", loads, AutoPhases)
	}
	for i := 100; i < 250; i++ {
		sessions = append(sessions, add(i))
	}
	if got, want := tbl.SlotLoads(), []int{101, 0, 50, 0, 0, 100, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("250 sessions: %v, want %v", got, want)
	}
	if s := sessions[150]; s.Slot() != 5 || !tbl.sessionEpoch(s).Equal(epoch.Add(50*time.Millisecond)) {
		t.Errorf("the 151st session: slot %d, grid from %v; want 5, half an interval in", s.Slot(), tbl.sessionEpoch(s).Sub(epoch))
	}
	// Ten of phase 0 leave: the next ten fill it again, before phase 2.
	for _, s := range sessions[:10] {
		tbl.Remove(s, nil)
	}
	for i := 250; i < 260; i++ {
		if s := add(i); s.Slot() != 0 {
			t.Fatalf("after leavers, session %d went to slot %d, want 0", i, s.Slot())
		}
	}
	for i := 260; i < 1050; i++ {
		add(i)
	}
	for slot, n := range tbl.placed[100*time.Millisecond] {
		if n < AutoPhaseSessions || n > AutoPhaseSessions+5 {
			t.Errorf("1 050 sessions: slot %d holds %d, want every phase full and the rest spread", slot, n)
		}
	}

	anchored := NewTable(DefaultLimits(), Grid{Schedule: Anchored, PhaseSlots: AutoPhaseSlots}, epoch)
	for i := range 150 {
		if _, _, err := anchored.Add(Options{Kind: KindMonitor, Name: fmt.Sprint("a", i), Config: Config{Interval: 100 * time.Millisecond, Lease: time.Minute}}, epoch); err != nil {
			t.Fatal(err)
		}
	}
	if loads := anchored.SlotLoads(); len(loads) != 1 {
		t.Errorf("anchored, auto: %d slots, want the single grid", len(loads))
	}
}

// TestAutoPhasesCountEachIntervalAlone: a phase opens for an interval
// only when its own routers fill the open ones, so ten routers at 150 ms
// beside a thousand at 100 ms stay on one phase of theirs (one pull grid,
// as the single grid has), browsers take no router's room, and a router
// that changes its interval keeps its slot and moves its room.
func TestAutoPhasesCountEachIntervalAlone(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tbl := NewTable(Limits{MaxSessions: 5000, MaxWatchSessions: 200, MinInterval: time.Millisecond, MaxInterval: time.Minute, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: AutoPhaseSlots}, epoch)
	add := func(kind Kind, name string, iv time.Duration) *Session {
		o := Options{Kind: kind, Name: name, Config: Config{Interval: iv, Lease: time.Minute}}
		if kind != KindMonitor {
			o.NoLease = true
		}
		s, _, err := tbl.Add(o, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range 150 {
		add(KindWatch, fmt.Sprint("w", i), time.Second)
	}
	for i := range 1000 {
		add(KindMonitor, fmt.Sprint("r", i), 100*time.Millisecond)
	}
	var slow []*Session
	for i := range 10 {
		slow = append(slow, add(KindMonitor, fmt.Sprint("s", i), 150*time.Millisecond))
	}
	for _, s := range slow {
		if s.Slot() != 0 {
			t.Fatalf("a 150 ms router beside a thousand at 100 ms went to slot %d, want 0: its interval's first phase", s.Slot())
		}
	}
	if got := tbl.placed[100*time.Millisecond]; !slices.Equal(got, []int{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}) {
		t.Errorf("1 000 routers at 100 ms beside 150 browsers: %v, want ten full phases (browsers take no room)", got)
	}
	// One of them moves to 100 ms: its room moves, its slot stays.
	if !tbl.Update(slow[0], Config{Interval: 100 * time.Millisecond, Lease: time.Minute}, epoch, false) {
		t.Fatal("update refused")
	}
	if slow[0].Slot() != 0 || tbl.placed[150*time.Millisecond][0] != 9 || tbl.placed[100*time.Millisecond][0] != 101 {
		t.Errorf("after the update: slot %d, 150 ms %v, 100 ms %v", slow[0].Slot(), tbl.placed[150*time.Millisecond], tbl.placed[100*time.Millisecond])
	}
	for _, s := range slow[1:] {
		tbl.Remove(s, nil)
	}
	if _, ok := tbl.placed[150*time.Millisecond]; ok {
		t.Error("an interval no router uses any more is still counted")
	}
}

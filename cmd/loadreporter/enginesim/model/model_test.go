package model

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// t0 is where every test's engine time starts; the model takes time as an
// argument, so no clock is involved.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newEngine(t *testing.T, edit func(*Params)) *Engine {
	t.Helper()
	p := DefaultParams()
	if edit != nil {
		edit(&p)
	}
	e, err := New(p, t0)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func submit(t *testing.T, e *Engine, at time.Time, prompt, maxNew, rank int) uint64 {
	t.Helper()
	id, err := e.Submit(at, Request{PromptTokens: prompt, MaxNewTokens: maxNew, Rank: rank})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// step ends the earliest step (starting it first if a request is waiting
// for an idle rank) and returns when it ended and what happened.
func step(t *testing.T, e *Engine) (time.Time, []Event) {
	t.Helper()
	for range 2 {
		at, ok := e.NextEvent()
		if !ok {
			t.Fatal("nothing to do")
		}
		before := stepsRun(e)
		if evs := e.Advance(at, nil); stepsRun(e) > before {
			return at, evs
		}
	}
	t.Fatal("no step ended")
	return time.Time{}, nil
}

func stepsRun(e *Engine) (n uint64) {
	for r := range e.Params().DPSize {
		n += e.Live(r, t0).Steps
	}
	return n
}

// drain runs the engine until every rank is idle and returns every
// finished request's stats by id.
func drain(t *testing.T, e *Engine) map[uint64]RequestStats {
	t.Helper()
	done := map[uint64]RequestStats{}
	for i := 0; ; i++ {
		if i > 1_000_000 {
			t.Fatal("engine never went idle")
		}
		at, ok := e.NextEvent()
		if !ok {
			return done
		}
		for _, ev := range e.Advance(at, nil) {
			if ev.Kind == EventFinished {
				done[ev.Request] = ev.Stats
			}
		}
	}
}

// TestStepTimeGrowsWithBatch: a prefill step costs the overhead plus its
// prompt tokens, a decode step the overhead plus its sequences and the KV
// tokens they read, so both grow with the batch (the package doc's
// formula).
func TestStepTimeGrowsWithBatch(t *testing.T) {
	t.Parallel()
	var lastPrefill, lastDecode time.Duration
	for _, n := range []int{1, 8, 64} {
		e := newEngine(t, nil)
		p := e.Params()
		for range n {
			submit(t, e, t0, 100, 10, AnyRank)
		}
		end, _ := step(t, e)
		prefill := end.Sub(t0)
		if want := p.StepOverhead + time.Duration(n*100)*p.PrefillPerToken; prefill != want {
			t.Errorf("batch %d: prefill step %v, want %v", n, prefill, want)
		}
		next, _ := step(t, e)
		decode := next.Sub(end)
		// After the prefill each sequence holds its prompt and first token.
		kv := int64(n * 101)
		if want := p.StepOverhead + time.Duration(n)*p.DecodePerSeq + time.Duration(kv)*p.DecodePer1kKVTokens/1000; decode != want {
			t.Errorf("batch %d: decode step %v, want %v", n, decode, want)
		}
		if prefill <= lastPrefill || decode <= lastDecode {
			t.Errorf("batch %d: prefill %v after %v, decode %v after %v: want both to grow", n, prefill, lastPrefill, decode, lastDecode)
		}
		lastPrefill, lastDecode = prefill, decode
	}
}

// TestMaxRunningRequestsCaps: no more than max_running_requests are ever
// admitted; the rest wait, and one is admitted only when one finishes.
func TestMaxRunningRequestsCaps(t *testing.T) {
	t.Parallel()
	e := newEngine(t, func(p *Params) { p.MaxRunningRequests = 4 })
	var ids []uint64
	for range 10 {
		ids = append(ids, submit(t, e, t0, 50, 5, 0))
	}
	e.Advance(t0, nil) // starts the first step
	if l := e.Live(0, t0); l.NumRunningReqs != 4 || l.NumWaitingReqs != 6 {
		t.Fatalf("after 10 arrivals: running %d waiting %d, want 4 and 6", l.NumRunningReqs, l.NumWaitingReqs)
	}
	done := map[uint64]RequestStats{}
	for {
		at, ok := e.NextEvent()
		if !ok {
			break
		}
		for _, ev := range e.Advance(at, nil) {
			if ev.Kind == EventFinished {
				done[ev.Request] = ev.Stats
			}
		}
		if l := e.Live(0, at); l.NumRunningReqs > 4 {
			t.Fatalf("at %v: %d running, more than 4", at.Sub(t0), l.NumRunningReqs)
		}
	}
	if len(done) != 10 {
		t.Fatalf("%d of 10 finished", len(done))
	}
	// The fifth waited for the first four, which finish together.
	if a, f := done[ids[4]].Admitted, done[ids[0]].Finished; !a.Equal(f) {
		t.Errorf("fifth admitted at %v, first finished at %v: want the same instant", a.Sub(t0), f.Sub(t0))
	}
	if w := done[ids[4]].QueueWait(); w <= 0 {
		t.Errorf("fifth waited %v, want > 0", w)
	}
}

// TestKVBudgetQueues: a request is admitted only when its whole possible
// length fits in the KV cache beside the admitted requests'; otherwise it
// waits though slots are free, and one that could never fit is refused.
func TestKVBudgetQueues(t *testing.T) {
	t.Parallel()
	e := newEngine(t, func(p *Params) { p.MaxTotalNumTokens = 1000 })
	a := submit(t, e, t0, 300, 300, 0) // needs 600
	b := submit(t, e, t0, 300, 300, 0) // 600 more would be 1200
	e.Advance(t0, nil)
	if l := e.Live(0, t0); l.NumRunningReqs != 1 || l.NumWaitingReqs != 1 {
		t.Fatalf("running %d waiting %d, want 1 and 1 (KV full, slots free)", l.NumRunningReqs, l.NumWaitingReqs)
	}
	done := drain(t, e)
	if got, want := done[b].Admitted, done[a].Finished; !got.Equal(want) {
		t.Errorf("second admitted at %v, want when the first finished (%v)", got.Sub(t0), want.Sub(t0))
	}

	_, err := e.Submit(t0, Request{PromptTokens: 900, MaxNewTokens: 200, Rank: AnyRank})
	if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), "KV cache of 1000 tokens") {
		t.Errorf("1100 tokens on a 1000-token cache: %v, want INVALID_ARGUMENT naming the cache", err)
	}
}

// TestPublishedLoadLagsByNSteps: the published snapshot moves after a
// prefill step, every N-th decode step and on going idle, never in
// between, so during decoding it is at most N-1 steps old while the live
// state moves every step.
func TestPublishedLoadLagsByNSteps(t *testing.T) {
	t.Parallel()
	const n = 4
	e := newEngine(t, func(p *Params) { p.LoadSnapshotPublishInterval = n; p.DecodeLogInterval = 2 * n })
	submit(t, e, t0, 100, 30, 0)
	submit(t, e, t0, 100, 30, 0)
	if at, _ := step(t, e); e.Published(0).Steps != 1 || !e.Published(0).Timestamp.Equal(at) {
		t.Fatalf("after the prefill step the published snapshot is of step %d, want 1", e.Published(0).Steps)
	}
	lastUsed := e.Published(0).NumUsedTokens
	for i := 1; i <= 12; i++ {
		at, evs := step(t, e)
		pub, live := e.Published(0), e.Live(0, at)
		published := hasEvent(evs, EventLoadPublished)
		if want := i%n == 0; published != want {
			t.Errorf("decode step %d: published %t, want %t", i, published, want)
		}
		if age := live.Steps - pub.Steps; age >= n {
			t.Errorf("decode step %d: published snapshot %d steps old, want < %d", i, age, n)
		}
		if !published && pub.NumUsedTokens != lastUsed {
			t.Errorf("decode step %d: published num_used_tokens moved to %d without a publication", i, pub.NumUsedTokens)
		}
		if live.NumUsedTokens == pub.NumUsedTokens && !published {
			t.Errorf("decode step %d: live and published both %d; the live state should have moved on", i, live.NumUsedTokens)
		}
		if metrics := hasEvent(evs, EventMetricsPublished); metrics != (i%(2*n) == 0) {
			t.Errorf("decode step %d: metrics published %t, want every %d", i, metrics, 2*n)
		}
		lastUsed = pub.NumUsedTokens
	}

	// An arrival during a step shows as waiting in the live state only;
	// the next step is its prefill, which publishes it as running.
	at, _ := e.NextEvent()
	submit(t, e, at.Add(-time.Millisecond), 100, 5, 0)
	if pub, live := e.Published(0), e.Live(0, at); pub.NumWaitingReqs != 0 || live.NumWaitingReqs != 1 {
		t.Fatalf("arrival mid-step: published waiting %d, live waiting %d, want 0 and 1", pub.NumWaitingReqs, live.NumWaitingReqs)
	}
	step(t, e) // the decode step in progress
	if _, evs := step(t, e); !hasEvent(evs, EventLoadPublished) || e.Published(0).NumRunningReqs != 3 {
		t.Errorf("the prefill of the arrival: published %t with %d running, want a publication with 3", hasEvent(evs, EventLoadPublished), e.Published(0).NumRunningReqs)
	}
	drain(t, e)
	if pub := e.Published(0); pub.NumRunningReqs != 0 || pub.NumUsedTokens != 0 || pub.Steps != e.Live(0, t0).Steps {
		t.Errorf("idle: published %+v, want the last step's empty state", pub)
	}
}

func hasEvent(evs []Event, k EventKind) bool {
	for _, ev := range evs {
		if ev.Kind == k {
			return true
		}
	}
	return false
}

// TestCancelFreesSlot: a cancelled request leaves the batch and its KV
// tokens are freed at once; the step already running ends when planned,
// and the next step admits the request that was waiting for the slot.
func TestCancelFreesSlot(t *testing.T) {
	t.Parallel()
	e := newEngine(t, func(p *Params) { p.MaxRunningRequests = 1 })
	a := submit(t, e, t0, 100, 1000, 0)
	b := submit(t, e, t0, 100, 3, 0)
	step(t, e) // a's prefill
	step(t, e) // a's first decode
	stepEnd, _ := e.NextEvent()
	mid := stepEnd.Add(-time.Millisecond)
	st, ok := e.Cancel(mid, a)
	if !ok || !st.Cancelled || st.OutputTokens != 2 || !st.Finished.Equal(mid) {
		t.Fatalf("cancel: %+v %t, want cancelled with 2 tokens at the cancel", st, ok)
	}
	if l := e.Live(0, mid); l.NumRunningReqs != 0 || l.NumUsedTokens != 0 || l.NumWaitingReqs != 1 {
		t.Fatalf("after the cancel: running %d used %d waiting %d, want 0 0 1", l.NumRunningReqs, l.NumUsedTokens, l.NumWaitingReqs)
	}
	if at, ok := e.NextEvent(); !ok || !at.Equal(stepEnd) {
		t.Fatalf("the running step ends at %v (%t), want as planned at %v", at.Sub(t0), ok, stepEnd.Sub(t0))
	}
	at, evs := step(t, e)
	for _, ev := range evs {
		if ev.Request == a {
			t.Errorf("cancelled request still got %+v", ev)
		}
	}
	if l := e.Live(0, at); l.NumRunningReqs != 1 || l.NumWaitingReqs != 0 {
		t.Errorf("next step: running %d waiting %d, want b admitted", l.NumRunningReqs, l.NumWaitingReqs)
	}
	if done := drain(t, e); !done[b].Admitted.Equal(stepEnd) || done[b].OutputTokens != 3 {
		t.Errorf("b: %+v, want admitted at the end of the step a was cancelled in", done[b])
	}
	if _, ok := e.Cancel(at, a); ok {
		t.Error("a second cancel found the request")
	}

	// A request cancelled while it waits never runs.
	e = newEngine(t, func(p *Params) { p.MaxRunningRequests = 1 })
	submit(t, e, t0, 10, 2, 0)
	c := submit(t, e, t0, 10, 2, 0)
	if st, ok := e.Cancel(t0, c); !ok || !st.Admitted.IsZero() {
		t.Fatalf("cancel while waiting: %+v %t", st, ok)
	}
	if done := drain(t, e); len(done) != 1 {
		t.Errorf("%d finished, want only the first", len(done))
	}
}

// TestDPRanksIndependent: each rank has its own queue, batch and step
// clock; a busy rank does not slow another, and requests that name no
// rank are spread by the load-balance method.
func TestDPRanksIndependent(t *testing.T) {
	t.Parallel()
	solo := newEngine(t, func(p *Params) { p.DPSize = 2 })
	lone := submit(t, solo, t0, 200, 10, 1)
	want := drain(t, solo)[lone]

	e := newEngine(t, func(p *Params) { p.DPSize = 2 })
	for range 50 {
		submit(t, e, t0, 2000, 100, 0)
	}
	got := submit(t, e, t0, 200, 10, 1)
	done := drain(t, e)
	if done[got].TTFT() != want.TTFT() || done[got].E2E() != want.E2E() {
		t.Errorf("rank 1 beside a busy rank 0: TTFT %v e2e %v, want %v %v as alone", done[got].TTFT(), done[got].E2E(), want.TTFT(), want.E2E())
	}
	if r0, r1 := e.Live(0, t0).Steps, e.Live(1, t0).Steps; r1 != 10 || r0 <= r1 {
		t.Errorf("steps: rank 0 %d, rank 1 %d; want rank 1's own 10", r0, r1)
	}

	rr := newEngine(t, func(p *Params) { p.DPSize = 3 })
	var ranks []int
	for range 6 {
		id := submit(t, rr, t0, 10, 1, AnyRank)
		st, _ := rr.Request(id)
		ranks = append(ranks, st.Rank)
	}
	if got := itoa(ranks); got != "0,1,2,0,1,2" {
		t.Errorf("round robin gave ranks %s", got)
	}

	// total_requests reads the published snapshot: the rank that published
	// the fewest requests gets the next one.
	tr := newEngine(t, func(p *Params) { p.DPSize = 2; p.LoadBalanceMethod = TotalRequests })
	submit(t, tr, t0, 10, 50, 0)
	submit(t, tr, t0, 10, 50, 0)
	step(t, tr) // rank 0's prefill publishes 2 running
	id := submit(t, tr, t0.Add(time.Second), 10, 1, AnyRank)
	if st, _ := tr.Request(id); st.Rank != 1 {
		t.Errorf("total_requests sent to rank %d, want the idle rank 1", st.Rank)
	}
}

func itoa(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// TestChunkedPrefillAndStats: a prompt longer than the chunk is prefilled
// over several steps; its first token comes with the last of them, and
// the recorded times add up.
func TestChunkedPrefillAndStats(t *testing.T) {
	t.Parallel()
	e := newEngine(t, func(p *Params) { p.ChunkedPrefillSize = 8192 })
	p := e.Params()
	id := submit(t, e, t0, 20_000, 3, 0)
	var prefill time.Duration
	for _, chunk := range []int{8192, 8192, 3616} {
		prefill += p.prefillStep(chunk)
	}
	st := drain(t, e)[id]
	if st.TTFT() != prefill {
		t.Errorf("TTFT %v, want three chunks' %v", st.TTFT(), prefill)
	}
	decodes := p.decodeStep(1, 20_001) + p.decodeStep(1, 20_002)
	if st.QueueWait() != 0 || st.E2E() != prefill+decodes || st.OutputTokens != 3 || st.Cancelled {
		t.Errorf("stats %+v (wait %v, e2e %v), want no wait and e2e %v", st, st.QueueWait(), st.E2E(), prefill+decodes)
	}
	if l := e.Published(0); l.GenThroughput <= 0 || l.Utilization != 1 {
		t.Errorf("idle snapshot after a busy run: throughput %v utilization %v, want > 0 and 1", l.GenThroughput, l.Utilization)
	}
}

// TestRefusals: parameters out of range and requests that could never
// run are refused with INVALID_ARGUMENT naming the field.
func TestRefusals(t *testing.T) {
	t.Parallel()
	for field, edit := range map[string]func(*Params){
		"dp_size":                        func(p *Params) { p.DPSize = 0 },
		"max_running_requests":           func(p *Params) { p.MaxRunningRequests = 0 },
		"max_total_num_tokens":           func(p *Params) { p.MaxTotalNumTokens = 1 },
		"context_length":                 func(p *Params) { p.ContextLength = -3 },
		"chunked_prefill_size":           func(p *Params) { p.ChunkedPrefillSize = 0 },
		"step_overhead":                  func(p *Params) { p.StepOverhead = -time.Millisecond },
		"decode_per_seq":                 func(p *Params) { p.DecodePerSeq = 2 * time.Hour },
		"decode_per_1k_kv_tokens":        func(p *Params) { p.DecodePer1kKVTokens = -1 },
		"prefill_per_token":              func(p *Params) { p.PrefillPerToken = -1 },
		"load_snapshot_publish_interval": func(p *Params) { p.LoadSnapshotPublishInterval = 0 },
		"decode_log_interval":            func(p *Params) { p.DecodeLogInterval = 0 },
		"load_balance_method":            func(p *Params) { p.LoadBalanceMethod = "random" },
	} {
		p := DefaultParams()
		edit(&p)
		_, err := New(p, t0)
		var pe *ParamError
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%s: %v, want INVALID_ARGUMENT naming it", field, err)
		}
	}
	e := newEngine(t, func(p *Params) { p.DPSize = 2; p.ContextLength = 100 })
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{PromptTokens: 0, MaxNewTokens: 1, Rank: AnyRank}, "prompt is empty"},
		{Request{PromptTokens: 1, MaxNewTokens: -1, Rank: AnyRank}, "max_new_tokens -1"},
		{Request{PromptTokens: 60, MaxNewTokens: 41, Rank: AnyRank}, "context length 100"},
		{Request{PromptTokens: 1, MaxNewTokens: 1, Rank: 2}, "routed_dp_rank 2: want 0 to 1"},
	} {
		if _, err := e.Submit(t0, tc.r); domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT with %q", tc.r, err, tc.want)
		}
	}
}

// TestModelIsPure: the model imports the standard library and domain
// only, so a benchmark can run it in virtual time with nothing of the
// server's (no clock, no I/O) coming along.
func TestModelIsPure(t *testing.T) {
	t.Parallel()
	for _, imp := range sharedtest.ProductionImports(t) {
		if imp.ThirdParty() && imp.Path != "github.com/loadreporter/loadreporter/domain" {
			t.Errorf("%s imports %s; the model may import the standard library and domain only", imp.File, imp.Path)
		}
	}
}

// TestAnIdleRankIsReadStampedNow: a reader of an idle rank finds its
// numbers stamped at the read (SGLang's idle loop republishes them);
// of a busy rank, the snapshot as the last publication took it.
func TestAnIdleRankIsReadStampedNow(t *testing.T) {
	t.Parallel()
	e := newEngine(t, func(p *Params) { p.LoadSnapshotPublishInterval = 100 })
	later := t0.Add(time.Second)
	if got := e.PublishedAt(0, later).Timestamp; !got.Equal(later) {
		t.Errorf("idle: stamped %v, want the read's %v", got, later)
	}
	submit(t, e, later, 100, 30, 0)
	if got := e.PublishedAt(0, later.Add(time.Millisecond)).Timestamp; !got.Equal(e.Published(0).Timestamp) {
		t.Errorf("a request waiting for its step: stamped %v, want the snapshot's %v", got, e.Published(0).Timestamp)
	}
	at, _ := step(t, e) // the prefill publishes
	step(t, e)          // a decode step does not
	if got := e.PublishedAt(0, at.Add(time.Second)).Timestamp; !got.Equal(at) {
		t.Errorf("busy: stamped %v, want the prefill's publication at %v", got, at)
	}
}

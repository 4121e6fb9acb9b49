package sglangzmq

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// fakeDetail is a detail source answering what the test last set.
type fakeDetail struct {
	mu    sync.Mutex
	snap  domain.Snapshot
	err   error
	calls int
}

func (f *fakeDetail) Pull(ctx context.Context) (domain.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.snap, f.err
}

func (f *fakeDetail) set(snap domain.Snapshot, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.err = snap, err
}

// detailPulled waits for the next detail pull to be stored and returns its
// error.
func detailPulled(t *testing.T, c *counts) error {
	t.Helper()
	select {
	case err := <-c.details:
		return err
	case <-time.After(sourcetest.Wait):
		t.Fatal("no detail pull")
		return nil
	}
}

func TestDetailMerge(t *testing.T) {
	p := newPublishers(t, 2)
	clk := porttest.NewClock(t0)
	c := newCounts()
	detail := domain.RankLoad{
		NumWaitingUncachedTokens: 4096, NumTotalTokens: 65330, MaxRunningRequests: 256, MaxTotalNumTokens: 180000,
		TokenUsage: 0.99, GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
		NumRunningReqs: 99, NumWaitingReqs: 99, NumUsedTokens: 99, // older than LoadStat's: not used
	}
	d0, d1 := detail, detail
	d1.DPRank = 1
	fd := &fakeDetail{snap: domain.Snapshot{Ranks: []domain.RankLoad{d0, d1, {DPRank: 7, GenThroughput: 1}}}}
	o := testOptions(p, 2, clk)
	o.Detail, o.DetailInterval, o.Observer = fd, time.Second, c.observer()
	s := start(t, o)
	if err := detailPulled(t, c); err != nil { // the first pull comes at Start
		t.Fatal(err)
	}
	p.warm(s, 0, body(t, 12, 3, 41250, 200000, nil))
	// A newer engine: capacity unknown (0), appended fields sent.
	p.warm(s, 1, body(t, 4, 0, 1000, 0, 1, 64, 1100, 128, 987654, 12.5))

	want0 := domain.RankLoad{
		DPRank: 0, SnapshotTime: t0,
		NumRunningReqs: 12, NumWaitingReqs: 3, NumUsedTokens: 41250, MaxTotalNumTokens: 200000, TokenUsage: 41250.0 / 200000,
		NumWaitingUncachedTokens: 4096, NumTotalTokens: 65330, MaxRunningRequests: 256,
		GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
	}
	want1 := domain.RankLoad{
		DPRank: 1, SnapshotTime: t0,
		NumRunningReqs: 4, NumUsedTokens: 1000, MaxTotalNumTokens: 180000, TokenUsage: 1000.0 / 180000,
		NumWaitingUncachedTokens: 64, NumTotalTokens: 1100, MaxRunningRequests: 128,
		GenThroughput: 1834.27, CacheHitRate: 0.4127, Utilization: 0.6012,
	}
	check := func(when string, want ...domain.RankLoad) {
		t.Helper()
		got := mustPull(t, s)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", when, got, want)
		}
		if err := domain.ValidateSnapshot(domain.Snapshot{Ranks: got}, domain.RankRange(2)); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	check("merged", want0, want1)

	// The detail pull fails: the last values stay for DetailMaxAge (three
	// intervals), then the load fields drop to 0 and the capacities stay.
	fd.set(domain.Snapshot{}, errors.New("GET /v1/loads: HTTP 500"))
	for age := 1; age <= 3; age++ {
		clk.Advance(time.Second)
		if err := detailPulled(t, c); err == nil {
			t.Fatal("detail pull succeeded, want the failure")
		}
		check("detail "+time.Duration(age*int(time.Second)).String()+" old", want0, want1)
	}
	clk.Advance(time.Second)
	detailPulled(t, c)
	aged0, aged1 := want0, want1
	aged0.NumWaitingUncachedTokens, aged0.NumTotalTokens = 0, 0
	aged0.GenThroughput, aged0.CacheHitRate, aged0.Utilization = 0, 0, 0
	aged1.GenThroughput, aged1.CacheHitRate, aged1.Utilization = 0, 0, 0 // its appended fields are LoadStat's
	check("detail 4s old", aged0, aged1)

	// It recovers.
	d0.GenThroughput = 900
	fd.set(domain.Snapshot{Ranks: []domain.RankLoad{d0, d1}}, nil)
	clk.Advance(time.Second)
	if err := detailPulled(t, c); err != nil {
		t.Fatal(err)
	}
	want0.GenThroughput = 900
	check("recovered", want0, want1)
}

func TestDetailOff(t *testing.T) {
	for _, maxRunning := range []int64{0, 64} {
		t.Run("max running "+strconv.FormatInt(maxRunning, 10), func(t *testing.T) {
			p := newPublishers(t, 2)
			fd := &fakeDetail{}
			o := testOptions(p, 2, porttest.NewClock(t0))
			o.Detail, o.DetailInterval, o.MaxRunningRequests = fd, 0, maxRunning
			s := start(t, o)
			p.warm(s, 0, body(t, 12, 3, 41250, 200000, 0))
			p.warm(s, 1, body(t, 4, 0, 1000, 0, 1, 64, 1100, 128))
			want := []domain.RankLoad{
				{
					DPRank: 0, SnapshotTime: t0, NumRunningReqs: 12, NumWaitingReqs: 3, NumUsedTokens: 41250,
					MaxTotalNumTokens: 200000, TokenUsage: 41250.0 / 200000, MaxRunningRequests: maxRunning,
				},
				{
					DPRank: 1, SnapshotTime: t0, NumRunningReqs: 4, NumUsedTokens: 1000,
					NumWaitingUncachedTokens: 64, NumTotalTokens: 1100, MaxRunningRequests: 128,
				},
			}
			got := mustPull(t, s)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			fd.mu.Lock()
			if fd.calls != 0 {
				t.Errorf("detail source pulled %d times, want never", fd.calls)
			}
			fd.mu.Unlock()
			// What the domain makes of it: LoadStat alone does not say
			// max_running_requests (five values) nor a capacity (0); the
			// operator's MaxRunningRequests fills the first.
			err := domain.ValidateSnapshot(domain.Snapshot{Ranks: got}, domain.RankRange(2))
			wantErr := "rank 0: num_running_reqs 12 exceeds max_running_requests 0"
			if maxRunning > 0 {
				wantErr = "rank 1: num_used_tokens 1000 exceeds max_total_num_tokens 0"
			}
			if domain.ErrorMessage(err) != wantErr {
				t.Errorf("ValidateSnapshot: %v, want %q", err, wantErr)
			}
		})
	}
}

package vllm

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/domain"
)

// FuzzParseMetrics checks that no body makes the parser (or the mapping to
// ranks) panic, that every error is one line, and that on success each
// rank's integer fields hold exactly the integral sample values the body
// carried. The committed corpus in testdata/fuzz/FuzzParseMetrics runs as an
// ordinary test.
func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(readFixture(f)))
	f.Add([]byte(readFixture(f) + cacheConfig(`engine="0",num_gpu_blocks="12345"`, `num_gpu_blocks="7"`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		engines, err := parseMetrics(body)
		if err != nil {
			if msg := domain.ErrorMessage(err); msg == "internal error" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not a one-line *domain.Error: %q", err)
			}
			return
		}
		if len(engines) == 0 {
			t.Fatal("parseMetrics succeeded with no engines")
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("parseMetrics accepted a body expfmt rejects: %v", err)
		}
		prev := counters{when: time.Unix(1, 0), hasGen: true, hasCache: true}
		for i, e := range engines {
			if i > 0 && engines[i-1].rank >= e.rank {
				t.Fatalf("engines not sorted and unique: %d then %d", engines[i-1].rank, e.rank)
			}
			checkInt(t, fams[metricRunning].GetMetric(), e.rank, e.running)
			checkInt(t, fams[metricWaiting].GetMetric(), e.rank, e.waiting)
			r := e.rankLoad(DefaultMaxRunningRequests, prev, e.counters.stamped(time.Unix(3, 0)))
			if r.NumRunningReqs != e.running || r.NumWaitingReqs != e.waiting || r.DPRank != e.rank {
				t.Fatalf("rankLoad changed parsed integers: %+v from %+v", r, e)
			}
			if r.CacheHitRate < 0 || r.CacheHitRate > 1 || r.GenThroughput < 0 || math.IsNaN(r.GenThroughput) || math.IsNaN(r.CacheHitRate) {
				t.Fatalf("rates out of range: %+v", r)
			}
		}
	})
}

// checkInt asserts that got is exactly the integral value of the one series
// of metrics whose engine label (absent: "0") names rank.
func checkInt(t *testing.T, metrics []*dto.Metric, rank, got int64) {
	t.Helper()
	for _, m := range metrics {
		r, err := rankOf("", m)
		if err != nil || r != rank {
			continue
		}
		v := m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		if v != math.Trunc(v) || float64(got) != v {
			t.Fatalf("rank %d: sample %v parsed as %d", rank, v, got)
		}
		return
	}
	t.Fatalf("rank %d: no series in the body", rank)
}

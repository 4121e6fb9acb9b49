package audittable

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loadreporter/loadreporter/domain"
)

// TestANarrowTableFitsATerminal: a reports table of realistic figures,
// and an outage with a long last_error, fit NarrowWidth columns as text;
// the wide table keeps every column.
func TestANarrowTableFitsATerminal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 7, 30, 0, 123e6, time.UTC)
	reports := []*domain.Report{
		{ReportTime: at, Worker: domain.Worker{Addr: "worker-17.serving.svc:30000"}, SourceInstanceID: "9f86d081884c7d65", SequenceID: 123456789,
			Status: domain.StatusHealthy, Ranks: []domain.RankLoad{{DPRank: 7, SnapshotTime: at, NumRunningReqs: 255, MaxRunningRequests: 256,
				NumWaitingReqs: 1234, NumWaitingUncachedTokens: 987654, NumUsedTokens: 1234567, NumTotalTokens: 2345678, MaxTotalNumTokens: 3456789,
				TokenUsage: 0.9876, GenThroughput: 12345.6, CacheHitRate: 0.5, Utilization: 0.75}}},
		{ReportTime: at, Worker: domain.Worker{Addr: "[fd00:1234:5678::17]:30000"}, Status: domain.StatusUnreachable,
			LastError: "GET http://127.0.0.1:30001/v1/loads?include=core: dial tcp 127.0.0.1:30001: connect: connection refused"},
	}
	wide := reportsTable(reports)
	var out strings.Builder
	enc := NewTextEncoder(&out)
	if err := enc.Encode(Narrow(wide)); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > NarrowWidth {
			t.Errorf("%d characters: %q", n, line)
		}
	}
	if !strings.Contains(out.String(), "KV usage") || strings.Contains(out.String(), "Instance") || !strings.Contains(out.String(), "…") {
		t.Errorf("narrow table:\n%s", out.String())
	}
	if len(wide.Columns) != len(reportsColumns) || Narrow(wide).Rows[1][len(narrowColumns)-1].Text == wide.Rows[1][5].Text {
		t.Error("Narrow changed the wide table or left the long error whole")
	}
}

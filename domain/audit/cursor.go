package audit

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// ReportKey identifies a stored report and orders reports the way every
// store returns them: by ReportTime, then WorkerAddr, SourceInstanceID,
// SequenceID.
type ReportKey struct {
	Time             time.Time
	WorkerAddr       string
	SourceInstanceID string
	SequenceID       uint64
}

// KeyOf returns the key of r.
func KeyOf(r *domain.Report) ReportKey {
	return ReportKey{Time: r.ReportTime, WorkerAddr: r.Worker.Addr, SourceInstanceID: r.SourceInstanceID, SequenceID: r.SequenceID}
}

// Compare returns -1, 0 or +1 as k sorts before, with or after o.
func (k ReportKey) Compare(o ReportKey) int {
	if c := k.Time.Compare(o.Time); c != 0 {
		return c
	}
	if c := strings.Compare(k.WorkerAddr, o.WorkerAddr); c != 0 {
		return c
	}
	if c := strings.Compare(k.SourceInstanceID, o.SourceInstanceID); c != 0 {
		return c
	}
	switch {
	case k.SequenceID < o.SequenceID:
		return -1
	case k.SequenceID > o.SequenceID:
		return 1
	}
	return 0
}

// Cursor returns the opaque cursor that continues after k in the given
// order; stores put it in ReportsPage.NextCursor.
func (k ReportKey) Cursor(descending bool) string {
	b, _ := json.Marshal(cursor{
		V: 1, T: k.Time.UnixMicro(), W: k.WorkerAddr, S: k.SourceInstanceID, Q: k.SequenceID, D: descending,
	})
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxCursorMicros is the end of year 9999 in Unix microseconds: no report
// is later.
var maxCursorMicros = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

type cursor struct {
	V int    `json:"v"`
	T int64  `json:"t"`
	W string `json:"w"`
	S string `json:"s"`
	Q uint64 `json:"q"`
	D bool   `json:"d"`
}

func decodeCursor(s string) (ReportKey, bool, error) {
	bad := domain.Errorf(domain.CodeInvalidArgument, "cursor: not a cursor returned by a previous page")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 4096 {
		return ReportKey{}, false, bad
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.V != 1 || c.W == "" || c.S == "" ||
		checkText("cursor", c.W) != nil || checkText("cursor", c.S) != nil ||
		// What no report holds: the stores would read such values
		// differently (a sequence past int64 wraps in one of them).
		c.T < 0 || c.T > maxCursorMicros || c.Q > math.MaxInt64 {
		return ReportKey{}, false, bad
	}
	return ReportKey{Time: time.UnixMicro(c.T).UTC(), WorkerAddr: c.W, SourceInstanceID: c.S, SequenceID: c.Q}, c.D, nil
}

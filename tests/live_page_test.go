package tests

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

var pageSequence = regexp.MustCompile(`data-testid="report-sequence">([^<]*)<`)

// TestTheLivePageWithoutScriptIsLive: with history off and no router or
// browser stream pulling, the live page pulls a report for itself, so a
// browser without JavaScript, which only reloads the page (SPEC §6), sees
// a new report at each reload instead of "No report yet" for ever.
func TestTheLivePageWithoutScriptIsLive(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.History.Interval = 0
	c.Poll.MaxAge = 50 * time.Millisecond
	engine := &countingEngine{ranks: 2}
	m := startMain(t, c, engine)
	seq := func() string {
		t.Helper()
		code, body := httpGet(t, "http://"+m.Addr()+"/")
		match := pageSequence.FindStringSubmatch(body)
		if code != 200 || match == nil {
			t.Fatalf("GET /: %d, no report sequence in the page", code)
		}
		return match[1]
	}
	first := seq()
	if first == "—" {
		t.Fatalf("the live page shows no report (engine pulled %d times)", engine.pulls.Load())
	}
	// Once the report is older than --poll-max-age, a reload pulls anew.
	eventually(t, testCtx(t, 10*time.Second), fmt.Sprintf("a reload past --poll-max-age to show a report after #%s", first),
		func() bool { return seq() != first })
	// A reload within --poll-max-age shares the report instead of pulling.
	c2 := testConfig()
	c2.History.Interval = 0
	c2.Poll.MaxAge = time.Hour
	engine2 := &countingEngine{ranks: 2}
	m = startMain(t, c2, engine2)
	a := seq()
	b := seq()
	if a != b || engine2.pulls.Load() != 1 {
		t.Fatalf("two loads within --poll-max-age: reports #%s and #%s, %d pulls; want one pull", a, b, engine2.pulls.Load())
	}
}

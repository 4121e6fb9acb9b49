package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// The references the targets are ratios to (docs/performance.md): what a
// user would pick instead, and the transport's floor.
const (
	orcaRef  = "orca"
	floorRef = "grpcfanout"
	// netHTTPRef is loadreporter with every connection on net/http.
	netHTTPRef = "nethttp"
	// beforeRef is loadreporter as an earlier build shipped it (--before),
	// for a step's before and after in one run.
	beforeRef = "before"
)

// scenarioResult is one scenario: every reference and ours with one
// --phase-slots setting, measured back to back.
type scenarioResult struct {
	o                     options
	slots                 int      // loadreporter's --phase-slots; defaultSlots: as shipped
	refs                  []result // in --peers order
	ours                  result
	loadBefore, loadAfter string
	met, unmet            []string
}

// ref is the reference of that kind, if it was measured.
func (sr *scenarioResult) ref(kind string) (result, bool) {
	for _, r := range sr.refs {
		if r.kind == kind {
			return r, true
		}
	}
	return result{}, false
}

// row is one line of a scenario's table; target is empty when docs/performance.md sets
// none for the scenario.
type row struct {
	name   string
	refs   []float64 // one per reference, in sr.refs' order
	ours   float64
	unit   string
	target string
	met    bool
}

func printTable(out io.Writer, sr *scenarioResult) {
	header := fmt.Sprintf("%-40s", "")
	for _, r := range sr.refs {
		header += fmt.Sprintf(" %11s", r.kind)
	}
	header += fmt.Sprintf(" %11s  %-5s", oursLabel(sr.slots), "")
	for _, r := range sr.refs {
		header += fmt.Sprintf(" %-13s", "vs "+r.kind)
	}
	fmt.Fprintf(out, "%s %-32s %s\n", header, "target", "met")
	for _, r := range scenarioRows(sr) {
		met := ""
		if r.target != "" {
			met = "no"
			if r.met {
				met = "yes"
				sr.met = append(sr.met, r.name)
			} else {
				sr.unmet = append(sr.unmet, r.name)
			}
		}
		line := fmt.Sprintf("%-40s", r.name)
		for _, v := range r.refs {
			line += fmt.Sprintf(" %11s", cell(v))
		}
		line += fmt.Sprintf(" %11s  %-5s", cell(r.ours), r.unit)
		for _, v := range r.refs {
			line += fmt.Sprintf(" %-13s", ratio(v, r.ours))
		}
		fmt.Fprintf(out, "%s %-32s %s\n", line, r.target, met)
	}
	fmt.Fprintf(out, "load after: %s\n", sr.loadAfter)
}

// cell prints a figure; a negative one is unknown (a peer without the
// counter).
func cell(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

// ratio is ours over the reference's, as the targets state it (whether
// it meets one is the met column's to say): "=" where both are zero, "∞"
// where only the reference is.
func ratio(ref, ours float64) string {
	switch {
	case ref < 0 || ours < 0:
		return "—"
	case ref == 0 && ours == 0:
		return "="
	case ref == 0:
		return "∞"
	}
	return fmt.Sprintf("%.2f×", ours/ref)
}

// oursLabel names loadreporter's column: "ours" as shipped, or "ours/N"
// with --phase-slots N.
func oursLabel(slots int) string {
	if slots == defaultSlots {
		return "ours"
	}
	return fmt.Sprintf("ours/%d", slots)
}

// The targets of docs/performance.md, as ratios to the references
// measured in the same run.
const (
	maxCPUToORCA        = 0.7 // CPU per delivered report, at most this times ORCA's shape's
	maxCPUToFloor       = 1.5 // and at most this times the bare fan-out's
	maxMemoryToORCA     = 1.2 // memory per stream, at most this times ORCA's shape's
	maxPullsPerInterval = 10  // engine pulls per shortest interval, however many routers
	maxLateFiresPercent = 1.0 // fires started more than 1 ms after their deadline
)

// scenarioRows builds the table of a scenario. A fan-out scenario (100
// routers or more) is held to the ratio targets; one router to its
// interval error and first report. A figure that could not be read
// (-1), on either side, never meets a target.
func scenarioRows(sr *scenarioResult) []row {
	o, ours := sr.o, sr.ours
	fanOut, single := o.routers >= 100, o.routers == 1
	var rows []row
	add := func(name string, f func(result) float64, unit string, target string, met bool) {
		r := row{name: name, ours: f(ours), unit: unit, target: target, met: met}
		for _, ref := range sr.refs {
			r.refs = append(r.refs, f(ref))
		}
		rows = append(rows, r)
	}
	// atMostTimesRef is a target "at most k times the reference's": its
	// text, and whether ours meets it (never against a reference not
	// run, nor when either figure is unknown).
	atMostTimesRef := func(k float64, f func(result) float64, kind string) (string, bool) {
		text := fmt.Sprintf("≤ %g× %s", k, kind)
		if k == 1 {
			text = "≤ " + kind
		}
		ref, have := sr.ref(kind)
		if !have {
			return text + " (not run)", false
		}
		return text, f(ours) >= 0 && f(ref) >= 0 && f(ours) <= k*f(ref)
	}
	judged := func(apply bool, text string, met bool) (string, bool) {
		if !apply {
			return "", false
		}
		return text, met
	}

	toORCA, metORCA := atMostTimesRef(maxCPUToORCA, perReport, orcaRef)
	toFloor, metFloor := atMostTimesRef(maxCPUToFloor, perReport, floorRef)
	t, ok := judged(fanOut, toORCA+", "+toFloor, metORCA && metFloor)
	add("worker CPU per delivered report", perReport, "µs", t, ok)
	add("worker CPU (share of one core)", share, "%", "", false)
	// Every report delivered: an interval's worth a router, but for the
	// one the window's edges may cut.
	owed := int64(o.routers) * (int64(ours.window/o.interval) - 1)
	t, ok = judged(ours.window > 0, fmt.Sprintf("≥ %d in all", owed), ours.delivered >= owed)
	add("reports delivered per second", func(r result) float64 { return perSecond(r, r.delivered) }, "/s", t, ok)
	add("late reports (gap ≥ 1.5 intervals)", func(r result) float64 { return float64(r.missed) }, "", "0", ours.missed == 0)
	add("  of them lost (replaced unread)", func(r result) float64 { return float64(r.dropped) }, "", "", false)
	// A window holds at most one more grid point of each phase than it
	// holds whole intervals, and a join is served at once, so each join
	// probe may cost a pull of its own: joins, not routers, add to the
	// bound.
	pullsOf := func(r result) float64 { return perSecond(r, r.pulls) }
	t, ok = "", false
	if ours.window > 0 {
		fires := maxPullsPerInterval * (int64(ours.window/o.interval) + 1)
		maxPulls := float64(fires+int64(ours.probes)) / ours.window.Seconds()
		t, ok = fmt.Sprintf("≤ %.1f", maxPulls), pullsOf(ours) >= 0 && pullsOf(ours) <= maxPulls
	}
	add("engine pulls per second", pullsOf, "/s", t, ok)
	late := lateShare(ours)
	t, ok = judged(fanOut, fmt.Sprintf("≤ %g", maxLateFiresPercent), late >= 0 && late <= maxLateFiresPercent)
	add("fires started > 1 ms after their deadline", lateShare, "%", t, ok)
	add("interval error p50", func(r result) float64 { return ms(r.intervalErrP50) }, "ms", "", false)
	// One router's figures stand on its every interval, but the window's
	// edges.
	whole := ours.window > 0 && ours.gaps >= int(ours.window/o.interval)-2
	t, ok = judged(single, "≤ 1", whole && ours.intervalErrP99 >= 0 && ours.intervalErrP99 <= time.Millisecond)
	add("interval error p99", func(r result) float64 { return ms(r.intervalErrP99) }, "ms", t, ok)
	add("  at the client's socket: p50", func(r result) float64 { return ms(r.socketErrP50) }, "ms", "", false)
	add("  at the client's socket: p99", func(r result) float64 { return ms(r.socketErrP99) }, "ms", "", false)
	add("receipt age p50 (receipt − report_time)", func(r result) float64 { return ms(r.ageP50) }, "ms", "", false)
	ageP99 := func(r result) float64 { return ms(r.ageP99) }
	t, ok = atMostTimesRef(1, ageP99, orcaRef)
	t, ok = judged(fanOut, t, ok)
	add("receipt age p99", ageP99, "ms", t, ok)
	add("first report after ack p50 (all open)", func(r result) float64 { return ms(r.firstP50) }, "ms", "", false)
	t, ok = judged(single, "≤ 1", ours.firstP99 >= 0 && ours.firstP99 <= time.Millisecond)
	add("first report after ack p99 (all open)", func(r result) float64 { return ms(r.firstP99) }, "ms", t, ok)
	add(fmt.Sprintf("one router joining: p50 of %d", len(ours.joins)), func(r result) float64 { return ms(percentile(r.joins, 50)) }, "ms", "", false)
	// Every probe must have had its first report, each within 1 ms.
	joined := ours.probes > 0 && len(ours.joins) == ours.probes
	t, ok = judged(fanOut, fmt.Sprintf("≤ 1, all %d", ours.probes), joined && percentile(ours.joins, 100) <= time.Millisecond)
	add("one router joining: worst", func(r result) float64 { return ms(percentile(r.joins, 100)) }, "ms", t, ok)
	memory := func(r result) float64 { return kib(r.rssPerStream) }
	t, ok = atMostTimesRef(maxMemoryToORCA, memory, orcaRef)
	t, ok = judged(fanOut, t, ok)
	add("memory per router stream (RSS)", memory, "KiB", t, ok)
	add("  live after a collection: heap", func(r result) float64 { return kib(r.liveHeap) }, "KiB", "", false)
	add("  live after a collection: stacks", func(r result) float64 { return kib(r.liveStacks) }, "KiB", "", false)
	add("leases lost", func(r result) float64 { return float64(r.leaseLost) }, "", "0", ours.leaseLost == 0)
	add("streams broken", func(r result) float64 { return float64(r.streamErrors) }, "", "0", ours.streamErrors == 0)
	return rows
}

// kib is bytes in KiB, keeping -1 (unknown) as it is.
func kib(b float64) float64 {
	if b < 0 {
		return -1
	}
	return b / 1024
}

// lateShare is the percentage of a server's fires that started more than
// a millisecond after their deadline (from ours' own histogram), or -1.
func lateShare(r result) float64 {
	if r.fires <= 0 || r.firesLate < 0 {
		return -1
	}
	return float64(r.firesLate) / float64(r.fires) * 100
}

// perReport is the CPU a delivered report cost, or -1 (unknown) when the
// CPU could not be read or nothing was delivered.
func perReport(r result) float64 {
	if r.cpu < 0 || r.delivered <= 0 {
		return -1
	}
	return float64(r.cpu.Microseconds()) / float64(r.delivered)
}

func share(r result) float64 {
	if r.cpu < 0 || r.window <= 0 {
		return -1
	}
	return r.cpu.Seconds() / r.window.Seconds() * 100
}

func perSecond(r result, n int64) float64 {
	if n < 0 || r.window <= 0 {
		return -1
	}
	return float64(n) / r.window.Seconds()
}

// errTargetsNotMet is run's answer when loadreporter as shipped missed a
// target of the suite: make bench then fails.
var errTargetsNotMet = errors.New("loadreporter as shipped did not meet every target")

// printSummary lists, per scenario, the targets met and not met, and
// says whether the shipped configuration met them all (errTargetsNotMet
// when not).
func printSummary(out io.Writer, rows []scenarioResult) error {
	fmt.Fprintf(out, "\n== targets (docs/performance.md), load now %s\n", machine.LoadAvg())
	allMet := true
	for _, sr := range rows {
		fmt.Fprintf(out, "%5d × %-5v %4d conn, %-8s met %d of %d", sr.o.routers, sr.o.interval, sr.o.conns,
			oursLabel(sr.slots)+":", len(sr.met), len(sr.met)+len(sr.unmet))
		if len(sr.unmet) > 0 {
			fmt.Fprintf(out, "; not met: %s", strings.Join(sr.unmet, ", "))
			if sr.slots == defaultSlots {
				allMet = false
			}
		}
		fmt.Fprintln(out)
	}
	if !allMet {
		fmt.Fprintln(out, "as shipped (ours): not every target met")
		return errTargetsNotMet
	}
	fmt.Fprintln(out, "as shipped (ours): every target met in every row")
	return nil
}

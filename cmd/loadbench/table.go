package main

import (
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
	name        string
	refs        []float64 // one per reference, in sr.refs' order
	ours        float64
	unit        string
	lowerBetter bool
	target      string
	met         bool
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
	fmt.Fprintf(out, "%s %-24s %s\n", header, "target", "met")
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
			line += fmt.Sprintf(" %-13s", ratio(v, r.ours, r.lowerBetter))
		}
		fmt.Fprintf(out, "%s %-24s %s\n", line, r.target, met)
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

// ratio is ours over the reference's, as the targets state it; a count
// ours holds at zero reads as such.
func ratio(ref, ours float64, lowerBetter bool) string {
	switch {
	case ref < 0 || ours < 0:
		return "—"
	case ref == 0 && ours == 0:
		return "="
	case ref == 0:
		return "—"
	}
	s := fmt.Sprintf("%.2f×", ours/ref)
	if lowerBetter && ours > ref || !lowerBetter && ours < ref {
		s += " !"
	}
	return s
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
	cpuToORCA        = 0.7 // CPU per delivered report, at most this times ORCA's shape's
	cpuToFloor       = 1.5 // and at most this times the bare fan-out's
	memoryToORCA     = 1.2 // memory per stream, at most this times ORCA's shape's
	pullsPerInterval = 10  // engine pulls per shortest interval, however many routers
	lateFiresShare   = 1.0 // % of fires started more than 1 ms after their deadline
)

// scenarioRows builds the table of a scenario. A fan-out scenario (100
// routers or more) is held to the ratio targets; one router to its
// interval error and first report.
func scenarioRows(sr *scenarioResult) []row {
	o, ours := sr.o, sr.ours
	fanOut, single := o.routers >= 100, o.routers == 1
	orca, haveORCA := sr.ref(orcaRef)
	floor, haveFloor := sr.ref(floorRef)
	var rows []row
	add := func(name string, f func(result) float64, unit string, lowerBetter bool, target string, met bool) {
		r := row{name: name, ours: f(ours), unit: unit, lowerBetter: lowerBetter, target: target, met: met}
		for _, ref := range sr.refs {
			r.refs = append(r.refs, f(ref))
		}
		rows = append(rows, r)
	}
	// toRef is a target "at most k times the reference's": its text, and
	// whether ours meets it (never against a reference not measured).
	toRef := func(k float64, f func(result) float64, ref result, have bool, name string) (string, bool) {
		text := fmt.Sprintf("≤ %g× %s", k, name)
		if k == 1 {
			text = "≤ " + name
		}
		if !have {
			return text + " (not run)", false
		}
		return text, f(ours) <= k*f(ref)
	}
	when := func(apply bool, text string, met bool) (string, bool) {
		if !apply {
			return "", false
		}
		return text, met
	}

	t1, ok1 := toRef(cpuToORCA, perReport, orca, haveORCA, "ORCA")
	t2, ok2 := toRef(cpuToFloor, perReport, floor, haveFloor, "floor")
	t, ok := when(fanOut, t1+", "+t2, ok1 && ok2)
	add("worker CPU per delivered report", perReport, "µs", true, t, ok)
	add("worker CPU (share of one core)", share, "%", true, "", false)
	expected := float64(o.routers) / o.interval.Seconds()
	add("reports delivered per second", func(r result) float64 { return perSecond(r, r.delivered) }, "/s", false, "", false)
	add("  (expected)", func(result) float64 { return expected }, "/s", false, "", false)
	add("late reports (gap ≥ 1.5 intervals)", func(r result) float64 { return float64(r.missed) }, "", true, "0", ours.missed == 0)
	add("  of them lost (replaced unread)", func(r result) float64 { return float64(r.dropped) }, "", true, "", false)
	// A join is served at once, so each join probe may cost a pull of its
	// own: joins, not routers, add to the bound.
	maxPulls := pullsPerInterval/o.interval.Seconds() + float64(len(ours.joins))/ours.window.Seconds()
	pullsOf := func(r result) float64 { return perSecond(r, r.pulls) }
	add("engine pulls per second", pullsOf, "/s", true, fmt.Sprintf("≤ %.1f", maxPulls), pullsOf(ours) <= maxPulls)
	t, ok = when(fanOut, fmt.Sprintf("≤ %g", lateFiresShare), ours.fires > 0 && lateShare(ours) <= lateFiresShare)
	add("fires started > 1 ms after their deadline", lateShare, "%", true, t, ok)
	add("interval error p50", func(r result) float64 { return ms(r.intervalErrP50) }, "ms", true, "", false)
	t, ok = when(single, "≤ 1", ours.intervalErrP99 <= time.Millisecond)
	add("interval error p99", func(r result) float64 { return ms(r.intervalErrP99) }, "ms", true, t, ok)
	add("  at the client's socket: p50", func(r result) float64 { return ms(r.socketErrP50) }, "ms", true, "", false)
	add("  at the client's socket: p99", func(r result) float64 { return ms(r.socketErrP99) }, "ms", true, "", false)
	add("receipt age p50 (receipt − report_time)", func(r result) float64 { return ms(r.ageP50) }, "ms", true, "", false)
	ageP99 := func(r result) float64 { return ms(r.ageP99) }
	t, ok = toRef(1, ageP99, orca, haveORCA, "ORCA")
	t, ok = when(fanOut, t, ok)
	add("receipt age p99", ageP99, "ms", true, t, ok)
	add("first report after ack p50 (all open)", func(r result) float64 { return ms(r.firstP50) }, "ms", true, "", false)
	t, ok = when(single, "≤ 1", ours.firstP99 <= time.Millisecond)
	add("first report after ack p99 (all open)", func(r result) float64 { return ms(r.firstP99) }, "ms", true, t, ok)
	add(fmt.Sprintf("one router joining: p50 of %d", len(ours.joins)), func(r result) float64 { return ms(percentile(r.joins, 50)) }, "ms", true, "", false)
	t, ok = when(fanOut, "≤ 1", len(ours.joins) > 0 && percentile(ours.joins, 100) <= time.Millisecond)
	add("one router joining: worst", func(r result) float64 { return ms(percentile(r.joins, 100)) }, "ms", true, t, ok)
	memory := func(r result) float64 { return r.rssPerStream / 1024 }
	t, ok = toRef(memoryToORCA, memory, orca, haveORCA, "ORCA")
	t, ok = when(fanOut, t, ok)
	add("memory per router stream (RSS)", memory, "KiB", true, t, ok)
	add("  live after a collection: heap", func(r result) float64 { return kib(r.liveHeap) }, "KiB", true, "", false)
	add("  live after a collection: stacks", func(r result) float64 { return kib(r.liveStacks) }, "KiB", true, "", false)
	add("leases lost", func(r result) float64 { return float64(r.leaseLost) }, "", true, "0", ours.leaseLost == 0)
	add("streams broken", func(r result) float64 { return float64(r.streamErrors) }, "", true, "0", ours.streamErrors == 0)
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

func perReport(r result) float64 {
	if r.delivered == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.delivered)
}

func share(r result) float64 { return r.cpu.Seconds() / r.window.Seconds() * 100 }

func perSecond(r result, n int64) float64 { return float64(n) / r.window.Seconds() }

// printSummary lists, per scenario, the targets met and not met, and
// says whether the shipped configuration met them all.
func printSummary(out io.Writer, rows []scenarioResult) {
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
	verdict := "every target met in every row"
	if !allMet {
		verdict = "not every target met"
	}
	fmt.Fprintf(out, "as shipped (ours): %s\n", verdict)
}

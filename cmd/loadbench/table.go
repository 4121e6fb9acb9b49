package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// scenarioResult is one scenario: the peer and ours with one --phase-slots
// setting, measured back to back.
type scenarioResult struct {
	o                     options
	slots                 int // loadreporter's --phase-slots
	peer, ours            result
	loadBefore, loadAfter string
	met, unmet            []string
}

// row is one line of a scenario's table; target is empty when docs/performance.md sets
// none for the scenario.
type row struct {
	name        string
	peer, ours  float64
	unit        string
	lowerBetter bool
	target      string
	met         bool
}

func printTable(out io.Writer, sr *scenarioResult) {
	fmt.Fprintf(out, "%-38s %12s %12s  %-5s %-14s %-12s %s\n", "", sr.peer.kind, oursLabel(sr.slots), "", "ratio", "target", "met")
	for _, r := range scenarioRows(sr.o, sr.slots, sr.peer, sr.ours) {
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
		fmt.Fprintf(out, "%-38s %12s %12s  %-5s %-14s %-12s %s\n", r.name, cell(r.peer), cell(r.ours), r.unit,
			ratio(r.peer, r.ours, r.lowerBetter), r.target, met)
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

func ratio(peer, ours float64, lowerBetter bool) string {
	switch {
	case peer <= 0 || ours <= 0:
		return "—"
	case !lowerBetter:
		return fmt.Sprintf("%.2f×", ours/peer)
	case ours <= peer:
		return fmt.Sprintf("%.1f× less", peer/ours)
	}
	return fmt.Sprintf("%.1f× more", ours/peer)
}

// oursLabel names loadreporter's column: "ours", or "ours/N" with N phase
// slots.
func oursLabel(slots int) string {
	if slots > 1 {
		return fmt.Sprintf("ours/%d", slots)
	}
	return "ours"
}

// scenarioRows builds the table of a scenario, with the targets of docs/performance.md where
// they apply: the 1 router row (interval error and first report) and the
// 1 000 and 10 000 router rows. Pulls may number one per phase slot and
// interval, whatever the number of routers (docs/routers.md: pulls are shared),
// plus one per join probe.
func scenarioRows(o options, slots int, peer, ours result) []row {
	big, single := o.routers >= 1000, o.routers == 1
	limit := func(ok bool, t string) (string, bool) {
		if !big {
			return "", false
		}
		return t, ok
	}
	var rows []row
	add := func(name string, p, u float64, unit string, lowerBetter bool, target string, met bool) {
		rows = append(rows, row{name, p, u, unit, lowerBetter, target, met})
	}
	t, ok := limit(perReport(ours) <= 5, "≤ 5")
	add("worker CPU per delivered report", perReport(peer), perReport(ours), "µs", true, t, ok)
	add("worker CPU (share of one core)", share(peer), share(ours), "%", true, "", false)
	expected := float64(o.routers) / o.interval.Seconds()
	add("reports delivered per second", perSecond(peer, peer.delivered), perSecond(ours, ours.delivered), "/s", false, "", false)
	add("  (expected)", expected, expected, "/s", false, "", false)
	add("reports missed (gap ≥ 1.5 intervals)", float64(peer.missed), float64(ours.missed), "", true, "0", ours.missed == 0)
	add("  of them lost (replaced unread)", float64(peer.dropped), float64(ours.dropped), "", true, "", false)
	// Each join probe is due at once: it may cost a pull of its own.
	maxPulls := float64(slots)/o.interval.Seconds() + float64(len(ours.joins))/ours.window.Seconds()
	add("engine pulls per second", perSecond(peer, peer.pulls), perSecond(ours, ours.pulls), "/s", true,
		fmt.Sprintf("≤ %.1f", maxPulls), perSecond(ours, ours.pulls) <= maxPulls*1.05)
	add("fires started > 1 ms after their deadline", lateShare(peer), lateShare(ours), "%", true, "", false)
	add("interval error p50", ms(peer.intervalErrP50), ms(ours.intervalErrP50), "ms", true, "", false)
	ivTarget := 5 * time.Millisecond
	if o.interval >= time.Second {
		ivTarget = 10 * time.Millisecond
	}
	t, ok = limit(ours.intervalErrP99 <= ivTarget, fmt.Sprintf("≤ %v", ms(ivTarget)))
	if single {
		t, ok = "≤ 1", ours.intervalErrP99 <= time.Millisecond
	}
	add("interval error p99", ms(peer.intervalErrP99), ms(ours.intervalErrP99), "ms", true, t, ok)
	add("  at the client's socket: p50", ms(peer.socketErrP50), ms(ours.socketErrP50), "ms", true, "", false)
	add("  at the client's socket: p99", ms(peer.socketErrP99), ms(ours.socketErrP99), "ms", true, "", false)
	add("receipt age p50 (receipt − report_time)", ms(peer.ageP50), ms(ours.ageP50), "ms", true, "", false)
	t, ok = limit(ours.ageP99 <= 5*time.Millisecond, "≤ 5")
	add("receipt age p99", ms(peer.ageP99), ms(ours.ageP99), "ms", true, t, ok)
	add("first report after ack p50 (all open)", ms(peer.firstP50), ms(ours.firstP50), "ms", true, "", false)
	t, ok = "", false
	if single {
		t, ok = "≤ 1", ours.firstP99 <= time.Millisecond
	}
	add("first report after ack p99 (all open)", ms(peer.firstP99), ms(ours.firstP99), "ms", true, t, ok)
	add(fmt.Sprintf("one router joining: p50 of %d", len(ours.joins)), ms(percentile(peer.joins, 50)), ms(percentile(ours.joins, 50)), "ms", true, "", false)
	t, ok = limit(len(ours.joins) > 0 && percentile(ours.joins, 100) <= time.Millisecond, "≤ 1")
	add("one router joining: worst", ms(percentile(peer.joins, 100)), ms(percentile(ours.joins, 100)), "ms", true, t, ok)
	t, ok = limit(ours.rssPerStream <= 16*1024, "≤ 16")
	add("memory per router stream (RSS)", peer.rssPerStream/1024, ours.rssPerStream/1024, "KiB", true, t, ok)
	add("  live after a collection: heap", kib(peer.liveHeap), kib(ours.liveHeap), "KiB", true, "", false)
	add("  live after a collection: stacks", kib(peer.liveStacks), kib(ours.liveStacks), "KiB", true, "", false)
	add("leases lost", float64(peer.leaseLost), float64(ours.leaseLost), "", true, "0", ours.leaseLost == 0)
	add("streams broken", float64(peer.streamErrors), float64(ours.streamErrors), "", true, "0", ours.streamErrors == 0)
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

// printSummary lists, per scenario, the targets met and not met.
func printSummary(out io.Writer, rows []scenarioResult) {
	fmt.Fprintf(out, "\n== targets (docs/performance.md), load now %s\n", machine.LoadAvg())
	for _, sr := range rows {
		fmt.Fprintf(out, "%5d × %-5v %3d conn, %-8s met %d of %d", sr.o.routers, sr.o.interval, sr.o.conns,
			oursLabel(sr.slots)+":", len(sr.met), len(sr.met)+len(sr.unmet))
		if len(sr.unmet) > 0 {
			fmt.Fprintf(out, "; not met: %s", strings.Join(sr.unmet, ", "))
		}
		fmt.Fprintln(out)
	}
}

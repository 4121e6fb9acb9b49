package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The targets, in the table's column order.
const (
	direct = "direct"
	front  = "front"
	nginx  = "nginx"
)

var columns = []string{direct, front, nginx}

// goal is the front mode's, in docs/performance.md's words.
const goal = "the front adds no more p99 latency and no more CPU per request than nginx, and the engine sees one scrape per window"

// results is everything one run measured.
type results struct {
	o         options
	post, sse map[string]*tally // by target
	// unary and stream are the gRPC rows, by target: the engine direct
	// and the gRPC front.
	unary, stream map[string]*tally
	hold          map[string]holdResult // front and nginx
	scrape        scrapeResult          // through the front
	profile       string                // where the front's CPU profile was written, if it was
}

// verdict is one part of the goal, met or not.
type verdict struct {
	name string
	met  bool
}

// judge weighs the figures against the goal: each proxy's added p99 and
// CPU per request, for each kind (added p99 over the same direct figure,
// so the front's added ≤ nginx's exactly when its p99 ≤ nginx's), the
// front answering every request, holding its streams with flat memory,
// and the engine's scrapes within one per window.
func judge(r results) []verdict {
	var v []verdict
	add := func(name string, met bool) { v = append(v, verdict{name, met}) }
	fp, np := r.post[front], r.post[nginx]
	fs, ns := r.sse[front], r.sse[nginx]
	add("POST: added p99 ≤ nginx's", percentile(fp.total, 99) <= percentile(np.total, 99))
	add("POST: CPU per request ≤ nginx's", cpuPer(fp) <= cpuPer(np))
	add("SSE: added p99, whole stream ≤ nginx's", percentile(fs.total, 99) <= percentile(ns.total, 99))
	add("SSE: added p99, first event ≤ nginx's", percentile(fs.first, 99) <= percentile(ns.first, 99))
	add("SSE: CPU per stream ≤ nginx's", cpuPer(fs) <= cpuPer(ns))
	add("every request through the front answered in full", fp.errors == 0 && fs.errors == 0 && fp.requests > 0 && fs.requests > 0)
	h := r.hold[front]
	add(fmt.Sprintf("%d streams held through the front, memory flat", r.o.holdStreams),
		h.opened == r.o.holdStreams && h.alive == r.o.holdStreams && flatHold(h))
	add("engine: one /metrics scrape per window", r.scrape.failed == 0 && r.scrape.served > 0 &&
		r.scrape.engineHits <= scrapeBound(r.scrape.span, r.o.window))
	return v
}

// row is one line of the table: a figure per column ("" when it does not
// apply) and, where the goal speaks of it, the goal and whether it is met.
type row struct {
	name  string
	cells [3]string
	unit  string
	goal  string
	met   string
}

func printTable(out io.Writer, r results, header []string) {
	verdicts := map[string]bool{}
	var met, unmet []string
	for _, v := range judge(r) {
		verdicts[v.name] = v.met
		if v.met {
			met = append(met, v.name)
		} else {
			unmet = append(unmet, v.name)
		}
	}
	mark := func(name string) string {
		if verdicts[name] {
			return "met"
		}
		return "not met"
	}
	var rows []row
	section := func(title string) { rows = append(rows, row{name: title}) }
	line := func(name string, unit string, cell func(col string) string) {
		rw := row{name: "  " + name, unit: unit}
		for i, c := range columns {
			rw.cells[i] = cell(c)
		}
		rows = append(rows, rw)
	}
	judged := func(verdict, goal string) {
		rows[len(rows)-1].goal, rows[len(rows)-1].met = goal, mark(verdict)
	}
	proxies := func(f func(col string) string) func(string) string {
		return func(col string) string {
			if col == direct {
				return "—"
			}
			return f(col)
		}
	}
	added := func(m map[string]*tally, first bool, p float64) func(string) string {
		return proxies(func(col string) string {
			pick := func(t *tally) []time.Duration {
				if first {
					return t.first
				}
				return t.total
			}
			return msCell(percentile(pick(m[col]), p) - percentile(pick(m[direct]), p))
		})
	}
	lat := func(m map[string]*tally, first bool, p float64) func(string) string {
		return func(col string) string {
			if first {
				return msCell(percentile(m[col].first, p))
			}
			return msCell(percentile(m[col].total, p))
		}
	}
	o := r.o

	section(fmt.Sprintf("POST /generate, non-streaming: %d clients, %d requests per target", o.clients, r.post[front].requests))
	line("latency p50", "ms", lat(r.post, false, 50))
	line("latency p99", "ms", lat(r.post, false, 99))
	line("added over direct, p50", "ms", added(r.post, false, 50))
	line("added over direct, p99", "ms", added(r.post, false, 99))
	judged("POST: added p99 ≤ nginx's", "front ≤ nginx")
	line("proxy CPU per request", "µs", proxies(func(c string) string { return usCell(cpuPer(r.post[c])) }))
	judged("POST: CPU per request ≤ nginx's", "front ≤ nginx")
	line("requests per second (its rounds)", "/s", func(c string) string { return rateCell(r.post[c]) })
	line("failed", "", func(c string) string { return failedCell(r.post[c]) })

	section(fmt.Sprintf("POST /generate, SSE of %d events: %d clients, %d streams per target", o.events, o.clients, r.sse[front].requests))
	line("first event p50", "ms", lat(r.sse, true, 50))
	line("first event p99", "ms", lat(r.sse, true, 99))
	line("whole stream p50", "ms", lat(r.sse, false, 50))
	line("whole stream p99", "ms", lat(r.sse, false, 99))
	line("added over direct, first event p50", "ms", added(r.sse, true, 50))
	line("added over direct, first event p99", "ms", added(r.sse, true, 99))
	judged("SSE: added p99, first event ≤ nginx's", "front ≤ nginx")
	line("added over direct, whole stream p50", "ms", added(r.sse, false, 50))
	line("added over direct, whole stream p99", "ms", added(r.sse, false, 99))
	judged("SSE: added p99, whole stream ≤ nginx's", "front ≤ nginx")
	line("proxy CPU per stream", "µs", proxies(func(c string) string { return usCell(cpuPer(r.sse[c])) }))
	judged("SSE: CPU per stream ≤ nginx's", "front ≤ nginx")
	line("proxy CPU per event", "µs", proxies(func(c string) string {
		return fmt.Sprintf("%.2f", float64(cpuPer(r.sse[c]).Nanoseconds())/1e3/float64(o.events+1))
	}))
	line("streams per second (its rounds)", "/s", func(c string) string { return rateCell(r.sse[c]) })
	line("failed", "", func(c string) string { return failedCell(r.sse[c]) })
	judged("every request through the front answered in full", "0 at the front")

	h := func(f func(h holdResult) string) func(string) string {
		return proxies(func(c string) string { return f(r.hold[c]) })
	}
	section(fmt.Sprintf("%d long-lived SSE streams (an event every %v) held through each proxy", o.holdStreams, o.holdEvery))
	line("RSS before", "MiB", h(func(x holdResult) string { return mibCell(x.before) }))
	for i := range holdSteps(o.holdStreams) {
		line(fmt.Sprintf("RSS at %d streams", holdSteps(o.holdStreams)[i]), "MiB", h(func(x holdResult) string {
			if i >= len(x.steps) {
				return "?"
			}
			return mibCell(x.steps[i].rss)
		}))
	}
	line(fmt.Sprintf("RSS after %v held", o.holdFor), "MiB", h(func(x holdResult) string { return mibCell(x.held) }))
	line("RSS per stream (before → all open)", "KiB", h(func(x holdResult) string { return fmt.Sprintf("%.1f", perStream(x)/1024) }))
	line("memory flat while held", "", h(func(x holdResult) string { return yesNo(flatHold(x)) }))
	line("streams open / alive at the end", "", h(func(x holdResult) string { return fmt.Sprintf("%d/%d", x.opened, x.alive) }))
	judged(fmt.Sprintf("%d streams held through the front, memory flat", o.holdStreams), fmt.Sprintf("%d/%d, flat", o.holdStreams, o.holdStreams))
	line("RSS once all closed", "MiB", h(func(x holdResult) string { return mibCell(x.closed) }))
	line("failed", "", h(func(x holdResult) string { return fmt.Sprint(x.errors) }))

	// gRPC: the engine direct and the gRPC front; the issue asks for
	// nothing more, so nginx has no figure and nothing is judged.
	grpcOnly := func(f func(col string) string) func(string) string {
		return func(col string) string {
			if col == nginx {
				return "—"
			}
			return f(col)
		}
	}
	grpcNote := "nginx not measured for gRPC; no target, figures only"
	section(fmt.Sprintf("gRPC unary call (an echo), via the gRPC front: %d clients, %d calls per target; %s", o.clients, r.unary[front].requests, grpcNote))
	line("latency p50", "ms", grpcOnly(lat(r.unary, false, 50)))
	line("latency p99", "ms", grpcOnly(lat(r.unary, false, 99)))
	line("added over direct, p50", "ms", grpcOnly(added(r.unary, false, 50)))
	line("added over direct, p99", "ms", grpcOnly(added(r.unary, false, 99)))
	line("front CPU per call", "µs", grpcOnly(proxies(func(c string) string { return usCell(cpuPer(r.unary[c])) })))
	line("calls per second (its rounds)", "/s", grpcOnly(func(c string) string { return rateCell(r.unary[c]) }))
	line("failed", "", grpcOnly(func(c string) string { return failedCell(r.unary[c]) }))

	section(fmt.Sprintf("gRPC server stream of %d messages, via the gRPC front: %d clients, %d streams per target; %s", o.events, o.clients, r.stream[front].requests, grpcNote))
	line("first message p50", "ms", grpcOnly(lat(r.stream, true, 50)))
	line("first message p99", "ms", grpcOnly(lat(r.stream, true, 99)))
	line("whole stream p50", "ms", grpcOnly(lat(r.stream, false, 50)))
	line("whole stream p99", "ms", grpcOnly(lat(r.stream, false, 99)))
	line("added over direct, first message p50", "ms", grpcOnly(added(r.stream, true, 50)))
	line("added over direct, first message p99", "ms", grpcOnly(added(r.stream, true, 99)))
	line("added over direct, whole stream p50", "ms", grpcOnly(added(r.stream, false, 50)))
	line("added over direct, whole stream p99", "ms", grpcOnly(added(r.stream, false, 99)))
	line("front CPU per stream", "µs", grpcOnly(proxies(func(c string) string { return usCell(cpuPer(r.stream[c])) })))
	line("front CPU per message", "µs", grpcOnly(proxies(func(c string) string {
		return fmt.Sprintf("%.2f", float64(cpuPer(r.stream[c]).Nanoseconds())/1e3/float64(o.events))
	})))
	line("streams per second (its rounds)", "/s", grpcOnly(func(c string) string { return rateCell(r.stream[c]) }))
	line("failed", "", grpcOnly(func(c string) string { return failedCell(r.stream[c]) }))

	s := r.scrape
	frontOnly := func(v string) func(string) string {
		return func(c string) string {
			if c == front {
				return v
			}
			return "—"
		}
	}
	section(fmt.Sprintf("GET /metrics at the front: %d scrapers every %v for %v, cache window %v", o.scrapers, o.scrapeEvery, o.scrapeFor, o.window))
	line("scrapes served", "", frontOnly(fmt.Sprint(s.served)))
	line("engine /metrics hits over the span", "", frontOnly(fmt.Sprint(s.engineHits)))
	judged("engine: one /metrics scrape per window", fmt.Sprintf("≤ %d in %.1f s", scrapeBound(s.span, o.window), s.span.Seconds()))
	line("scrape latency p50", "ms", frontOnly(msCell(percentile(s.latency, 50))))
	line("scrape latency p99", "ms", frontOnly(msCell(percentile(s.latency, 99))))
	line("failed", "", frontOnly(fmt.Sprint(s.failed)))

	for _, hl := range header {
		fmt.Fprintln(out, hl)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-44s %10s %10s %10s  %-4s  %-22s %s\n", "", direct, front, nginx, "unit", "goal", "")
	for _, rw := range rows {
		if rw.cells == [3]string{} {
			fmt.Fprintln(out, rw.name)
			continue
		}
		fmt.Fprintf(out, "%-44s %10s %10s %10s  %-4s  %-22s %s\n", rw.name, rw.cells[0], rw.cells[1], rw.cells[2], rw.unit, rw.goal, rw.met)
	}
	fmt.Fprintf(out, "\ngoal: %s\n", goal)
	fmt.Fprintln(out, "gRPC rows: side by side with the engine direct, the figures and what the front adds; no target is set for them, so none is judged")
	switch {
	case len(unmet) == 0:
		fmt.Fprintf(out, "met: all %d parts\n", len(met))
	default:
		fmt.Fprintf(out, "met %d of %d; not met: %s\n", len(met), len(met)+len(unmet), strings.Join(unmet, "; "))
	}
	for _, f := range failures(r) {
		fmt.Fprintln(out, f)
	}
	if r.profile != "" {
		fmt.Fprintf(out, "front's CPU profile over its latency rounds: %s (go tool pprof -top %s)\n", r.profile, r.profile)
	}
}

// holdSteps are the stream counts memory is sampled at: quarters of n.
func holdSteps(n int) []int {
	var s []int
	for q := 1; q <= 4; q++ {
		if v := n * q / 4; v > 0 && (len(s) == 0 || s[len(s)-1] != v) {
			s = append(s, v)
		}
	}
	return s
}

func msCell(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6) }

func usCell(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3) }

func mibCell(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func rateCell(t *tally) string {
	if t.wall <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f", float64(t.requests)/t.wall.Seconds())
}

func failedCell(t *tally) string { return fmt.Sprint(t.errors) }

// failures are the first failure of each target and test, for the lines
// under the table.
func failures(r results) []string {
	var out []string
	for _, c := range columns {
		for _, t := range []struct {
			what string
			err  error
		}{{"POST", firstErr(r.post[c])}, {"SSE", firstErr(r.sse[c])}, {"held stream", r.hold[c].firstErr},
			{"gRPC unary", firstErr(r.unary[c])}, {"gRPC stream", firstErr(r.stream[c])}} {
			if t.err != nil {
				out = append(out, fmt.Sprintf("first %s failure through %s: %v", t.what, c, t.err))
			}
		}
	}
	if r.scrape.firstErr != nil {
		out = append(out, fmt.Sprintf("first /metrics failure at the front: %v", r.scrape.firstErr))
	}
	return out
}

// firstErr is a tally's first failure; nil for no tally (a target the
// kind is not sent to).
func firstErr(t *tally) error {
	if t == nil {
		return nil
	}
	return t.firstErr
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

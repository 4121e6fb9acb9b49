package fleet

import (
	"log/slog"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/client"
)

// Bounds of the lines about workers connecting and losing their streams.
const (
	// workerLogWindow is the window those lines are counted over.
	workerLogWindow = 10 * time.Second
	// workerLogBurst is how many workers may have a line of their own in
	// one window, as it happens; past it, and for a worker's further
	// changes, the window's end says what was held back.
	workerLogBurst = 20
	// workerLogNamed is how many workers an aggregate line names.
	workerLogNamed = 5
)

// workerLog writes a line when a worker gets a registered stream or loses
// it, with why: what an operator looks for when a row turns red. Fresh and
// stale, which turn with every report, are left to the page. It is bounded
// whatever the workers do: in each window a worker's first change is said
// at once, for up to workerLogBurst workers; every other change is held,
// and the window's end says what the held workers are now and how many
// changes were not said (one line per worker while they are few, one line
// for all past workerLogBurst). 500 flapping workers make a few lines a
// second, not hundreds.
//
// Its methods are called from one goroutine; time comes in as an argument.
type workerLog struct {
	log     *slog.Logger
	workers map[string]*workerLine
	// lines is how many workers had a line of their own in this window.
	lines int
}

// workerLine is what the log knows of one worker.
type workerLine struct {
	up     bool   // it has a registered stream
	reason string // why it has none
	// said is true once its first change of the window was written.
	said bool
	// held counts its changes not written since its last line.
	held int
}

func newWorkerLog(log *slog.Logger) *workerLog {
	return &workerLog{log: log, workers: map[string]*workerLine{}}
}

// observe compares views with what the log saw last.
func (l *workerLog) observe(views []*client.View) {
	for _, v := range views {
		up := v.State != client.Disconnected
		w, seen := l.workers[v.Addr]
		if !seen {
			// A worker not connected yet is no news: its first stream is.
			w = &workerLine{reason: v.Reason}
			l.workers[v.Addr] = w
		}
		if up == w.up {
			continue
		}
		w.up, w.reason = up, v.Reason
		if w.said || l.lines >= workerLogBurst {
			w.held++
			continue
		}
		w.said = true
		l.lines++
		l.write(v.Addr, w, 0)
	}
	if len(l.workers) > len(views) { // some were removed from the fleet
		present := make(map[string]bool, len(views))
		for _, v := range views {
			present[v.Addr] = true
		}
		for addr := range l.workers {
			if !present[addr] {
				delete(l.workers, addr)
			}
		}
	}
}

// endWindow says what was held back in the window ending now, and starts
// the next.
func (l *workerLog) endWindow(now time.Time) {
	var held []string
	for addr, w := range l.workers {
		if w.held > 0 {
			held = append(held, addr)
		}
	}
	slices.Sort(held)
	if len(held) <= workerLogBurst {
		for _, addr := range held {
			l.write(addr, l.workers[addr], l.workers[addr].held)
		}
	} else {
		connected, changes := 0, 0
		for _, addr := range held {
			w := l.workers[addr]
			changes += w.held
			if w.up {
				connected++
			}
		}
		l.log.Warn("fleet: workers connecting and losing their streams; lines held back",
			"workers", len(held), "connected_now", connected, "lost_now", len(held)-connected, "changes", changes,
			"window", workerLogWindow, "until", now.UTC().Format(time.RFC3339), "first", held[:workerLogNamed])
	}
	for _, w := range l.workers {
		w.said, w.held = false, 0
	}
	l.lines = 0
}

// write says what w is now; held counts the changes before it that were
// not said.
func (l *workerLog) write(addr string, w *workerLine, held int) {
	attrs := []any{"worker", addr}
	if held > 0 {
		attrs = append(attrs, "changes_held_back", held)
	}
	if w.up {
		l.log.Info("fleet: worker connected", attrs...)
		return
	}
	l.log.Warn("fleet: worker lost", append(attrs, "reason", w.reason)...)
}

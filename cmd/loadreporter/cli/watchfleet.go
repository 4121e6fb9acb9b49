package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/client"
)

// clearScreen moves the cursor home and clears the screen, so a terminal
// shows the latest table in place.
const clearScreen = "\x1b[H\x1b[2J"

// watchFleet watches c.Targets with one client.Fleet and writes a table
// every c.Interval until ctx ends or c.Count tables were written. On a
// terminal each table replaces the last; elsewhere (a file, a pipe) the
// tables follow one another, separated by a blank line.
func watchFleet(ctx context.Context, c WatchConfig, out io.Writer, terminal bool) error {
	f, err := client.NewFleet(c.ClientOptions())
	if err != nil {
		return err
	}
	defer f.Close()
	for _, t := range c.Targets {
		if err := f.Add(t); err != nil {
			return err
		}
	}
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	for tables := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		table := FleetTable(time.Now(), f.Standings())
		if terminal {
			table = clearScreen + table
		} else if tables > 0 {
			table = "\n" + table
		}
		if _, err := io.WriteString(out, table); err != nil {
			return err
		}
		if tables++; c.Count > 0 && tables >= c.Count {
			return nil
		}
	}
}

// FleetTable renders workers as of now: a header, then one line per
// worker with its state, the age of its latest report, the requests and
// tokens pending on it (sent by this client since that report) and, per
// rank, running/max requests, waiting requests and KV-cache usage; a
// worker that is not Fresh also says why.
func FleetTable(now time.Time, workers []client.Standing) string {
	var b strings.Builder
	fresh := 0
	for _, w := range workers {
		if w.View.StateAt(now) == client.Fresh {
			fresh++
		}
	}
	fmt.Fprintf(&b, "fleet at %s: %d of %d workers fresh\n", now.UTC().Format("15:04:05"), fresh, len(workers))
	fmt.Fprintf(&b, "%-21s %-12s %8s %15s  %s\n", "WORKER", "STATE", "AGE", "PENDING req/tok", "RANKS (running/max waiting kv)")
	for _, w := range workers {
		v := w.View
		pending := fmt.Sprintf("%d/%d", w.Pending.Requests, w.Pending.Tokens)
		fmt.Fprintf(&b, "%-21s %-12s %8s %15s ", v.Addr, v.StateAt(now), reportAge(now, v), pending)
		for _, k := range v.Report.GetRanks() {
			fmt.Fprintf(&b, " [%d] %d/%d w%d kv%.1f%%", k.GetDpRank(), k.GetNumRunningReqs(), k.GetMaxRunningRequests(),
				k.GetNumWaitingReqs(), k.GetTokenUsage()*100)
		}
		if s := v.StateAt(now); s != client.Fresh {
			reason := v.Reason
			if reason == "" {
				reason = "no report since " + v.StaleAt.Format("15:04:05.000")
			}
			fmt.Fprintf(&b, "  (%s)", reason)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// reportAge is how long ago v's report arrived, "-" before the first.
func reportAge(now time.Time, v *client.View) string {
	if v.Report == nil || v.ReceivedAt.IsZero() {
		return "-"
	}
	return now.Sub(v.ReceivedAt).Round(time.Millisecond).String()
}

// isTerminal says out is a terminal, where a table can be redrawn in
// place.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

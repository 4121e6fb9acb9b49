package fireloop

import "time"

// Window paces the reports between deadlines (Options.Between): a change
// after a quiet Every goes at once, and the changes within Every of the
// last report go together at its end. Pure, with time passed in, so that
// a simulation paces them by the loop's own rule. The zero Window with
// Every set is ready; it is not safe for concurrent use.
type Window struct {
	Every     time.Duration
	last, due time.Time
}

// Changed takes a change at now and reports whether a report goes now
// (then call Sent); otherwise one is due at the end of the window (Due).
func (w *Window) Changed(now time.Time) bool {
	if w.last.IsZero() || now.Sub(w.last) >= w.Every {
		return true
	}
	if w.due.IsZero() {
		w.due = w.last.Add(w.Every)
	}
	return false
}

// Due is when the report held back for the window's end goes; false when
// none is.
func (w *Window) Due() (time.Time, bool) { return w.due, !w.due.IsZero() }

// Sent records a report sent at now: the window starts again from it.
func (w *Window) Sent(now time.Time) { w.last, w.due = now, time.Time{} }

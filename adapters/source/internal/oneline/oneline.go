package oneline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// String folds whitespace and control characters, and replaces invalid
// UTF-8, so that a message made from what a server sent stays on one line
// of last_error and of the logs. Sources use it for text taken from a body
// they parse, too.
func String(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// Short folds s to one line and keeps at most max bytes of it, cut on a
// rune boundary and marked with "…", so engine-supplied text cannot flood
// last_error.
func Short(s string, max int) string {
	s = String(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// OneLine folds whitespace and control characters, and replaces invalid
// UTF-8, so that a message made from what a peer sent (an engine's error
// body, a parser's message) stays on one line of last_error and of the logs.
func OneLine(s string) string {
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

// Shorten folds s to one line and keeps at most max bytes of it, cut on a
// rune boundary and marked with "…", so peer-supplied text cannot flood
// last_error.
func Shorten(s string, max int) string {
	s = OneLine(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// TextProblem says what keeps s from being text that every surface carries
// and every store holds, or "" when nothing does: "is not valid UTF-8"
// (protobuf strings must be UTF-8) or "contains a NUL byte" (PostgreSQL
// text refuses it), in that order.
func TextProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsRune(s, 0):
		return "contains a NUL byte"
	}
	return ""
}

package audittable

import (
	"regexp"
	"time"
)

// durationSyntax is a duration as time.ParseDuration reads it.
var durationSyntax = regexp.MustCompile(`^([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// DurationTooLong says s is written as a duration (90s, 1h30m) that
// time.ParseDuration refuses only because it is longer than a duration
// holds (about 292 years), so a form and a flag can say "too long" rather
// than "not a duration".
func DurationTooLong(s string) bool {
	if !durationSyntax.MatchString(s) {
		return false
	}
	_, err := time.ParseDuration(s)
	return err != nil
}

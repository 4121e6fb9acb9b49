// Package humanize writes numbers and durations the way the dashboard and
// the audit tables show them to people: "42.1 %", "262,144", "0.999 s",
// "5 min 3 s". It knows nothing of reports, pages or flags.
package humanize

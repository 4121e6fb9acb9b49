// Package metrics exports the fire loop's observations as Prometheus
// metrics. It implements ports.FireObserver and must not know how
// reports are pulled or delivered.
package metrics

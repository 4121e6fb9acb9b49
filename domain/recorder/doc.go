// Package recorder is the history writer that sits off the fire loop
// (docs/history.md): the fire loop hands it reports with Record, which never
// blocks; one writer goroutine batches them into ports.HistoryStore.Append,
// retries while the store fails (keeping the batch, waiting as the injected
// ports.Backoff says within a floor and a cap, logging each cause once per
// interval), drops the oldest reports when its buffer is full and counts
// them, and flushes what it holds on Close within the caller's deadline,
// saying once what was lost and why. The buffer is bounded by the memory
// its reports really hold (footprint), the batch being written included.
// A batch is bounded in bytes as in reports, its write timeout grows with
// its bytes, and a write that times out is split, so a backlog always
// drains, whatever the store's speed. Retention is the periodic,
// bounded enforcement of the history retention over the same port.
//
// Like the fire loop (domain/fireloop), it runs goroutines only once its
// owner starts them: New starts nothing; Start runs the writer (and each
// Append a short-lived watcher that enforces the write timeout) until
// Close; Retention.Run runs in its caller's goroutine until ctx ends. It
// depends only on domain and ports; time comes only from the injected
// ports.Clock and retry pacing from the injected ports.Backoff. It must
// not know which store or backoff library is behind the ports, nor
// anything about transports.
package recorder

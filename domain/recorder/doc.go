// Package recorder is the history writer that sits off the fire loop
// (SPEC §5): the fire loop hands it reports with Record, which never
// blocks; one writer goroutine batches them into ports.HistoryStore.Append,
// retries with capped exponential backoff while the store fails (keeping
// the batch), drops the oldest reports when its bounded buffer is full and
// counts them, and flushes what it holds on Close within the caller's
// deadline. RunRetention is the periodic, bounded enforcement of the
// history retention over the same port.
//
// It is one of the two packages under domain that run goroutines (the other
// is the fire loop, domain/reporter): its writer, and a short-lived watcher
// per Append that enforces the write timeout. It depends only on domain and
// ports; time comes only from the injected ports.Clock. It must not know
// which store is behind the port, nor anything about transports.
package recorder

// Package forwarded counts what a front passed to its engine that the
// engine's published load does not show yet, and adds it to the snapshots
// the reporter pulls, so that every router reads the requests every other
// router sent since the engine last published.
//
// An engine publishes its load between steps, and not at every step:
// SGLang after each prefill step, when it goes idle, and every
// --load-snapshot-publish-interval decode steps (15 by default). A request
// that arrives while the batch is full waits in the queue unseen for up to
// that many steps, and every router keeps sending to the engine that
// looked least loaded. The front sees each request the moment it passes it
// on: a request passed on at or after a rank's snapshot time and not yet
// answered is one the snapshot cannot count, and it is added to that
// snapshot as waiting, with its prompt tokens estimated from the bytes of
// its body. A rank without a snapshot time of its own (an engine that does
// not stamp its ranks) is left as the engine sent it.
//
// It is pure: time comes in as arguments, and it knows nothing of HTTP,
// engines or how snapshots are pulled; only the domain's Snapshot.
package forwarded

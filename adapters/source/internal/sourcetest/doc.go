// Package sourcetest holds what the snapshot sources' tests share: a fake
// server on 127.0.0.1, a bounded wait for a call that must honour its
// context, the checks every pull or construction failure must pass (one
// line, the right code, a timeout exactly when the context's deadline was
// the cause, the words the message must hold), and the check that a pulled
// snapshot breaking the invariants is refused by domain.ValidateSnapshot.
//
// Only _test.go files import it. It must not know any source's endpoint,
// response format or options: tests bring their own handlers and bodies.
package sourcetest

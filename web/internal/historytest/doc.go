// Package historytest is test support for web and web/audittable: Fake, a
// ports.HistoryQuery answered by function fields (validating each query
// first, as a store does), and helpers that answer a query from a fixture
// the way a store would, so the pages' tests need no real store.
//
// Only _test.go files may import it. It must not know any adapter.
package historytest

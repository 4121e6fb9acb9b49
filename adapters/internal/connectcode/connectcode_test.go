package connectcode

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
)

// TestTableBothWays: every row's domain code travels as a Connect code
// with its message, every row's Connect code reads back as a domain code
// (the round trip over the wire is adapters/rpc's TestErrorCodeRoundTrip);
// a *connect.Error passes as it is; a code the table does not list travels
// as Internal without its message.
func TestTableBothWays(t *testing.T) {
	for _, r := range Rows() {
		sent, ok := Code(r.Domain)
		if !ok {
			t.Fatalf("Code(%s) not found", r.Domain)
		}
		var ce *connect.Error
		if !errors.As(ToConnect(domain.Errorf(r.Domain, "why")), &ce) || ce.Code() != sent || ce.Message() != "why" {
			t.Errorf("ToConnect(%s) = %v, want %s: why", r.Domain, ce, sent)
		}
		if _, ok := DomainCode(r.Connect); !ok {
			t.Errorf("DomainCode(%s) not found", r.Connect)
		}
	}
	own := connect.NewError(connect.CodeUnimplemented, errors.New("not here"))
	if got := ToConnect(own); got != own {
		t.Errorf("ToConnect(%v) = %v, want it unchanged", own, got)
	}
	var ce *connect.Error
	if !errors.As(ToConnect(domain.Errorf(domain.CodePullTimeout, "secret detail")), &ce) ||
		ce.Code() != connect.CodeInternal || ce.Message() != "internal error" {
		t.Errorf("an unlisted code became %v, want Internal: internal error", ce)
	}
	if ToConnect(nil) != nil || FromConnect(context.Background(), nil) != nil {
		t.Error("nil did not stay nil")
	}
}

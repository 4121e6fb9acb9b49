package pullerr

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

func TestFromContext(t *testing.T) {
	if FromContext(context.Background(), "GET x", time.Now()) != nil {
		t.Fatal("a live context gave an error")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err := FromContext(ctx, "GET x", time.Now())
	if !errors.Is(err, context.DeadlineExceeded) || domain.ErrorCode(err) != domain.CodePullTimeout ||
		!strings.HasPrefix(domain.ErrorMessage(err), "GET x: timed out after ") {
		t.Fatalf("%v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	err = FromContext(cctx, "GetLoads y", time.Now())
	if !errors.Is(err, context.Canceled) || domain.ErrorMessage(err) != "GetLoads y: pull canceled" {
		t.Fatalf("%v", err)
	}
}

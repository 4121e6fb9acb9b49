package ports

import (
	"context"

	"github.com/loadreporter/loadreporter/domain"
)

// SnapshotSource reads the engine's published per-rank load.
type SnapshotSource interface {
	// Pull returns one snapshot. It must return promptly once ctx is done.
	// Errors become an UNREACHABLE report's last_error: a *domain.Error's
	// Message is used as is, so say what failed in one line (status code,
	// rank and field).
	Pull(ctx context.Context) (domain.Snapshot, error)
}

package postgres

import "context"

// WrapErr is wrapErr, for the classification test.
var WrapErr = wrapErr

// PackRanks packs ranks as history_reports.ranks holds them, for the
// benchmark's row-by-row writer.
var PackRanks = packRanks

// MigrateTo applies the embedded migrations up to version, or rolls back
// down to it, so a test can give one migration the data of the one before.
func MigrateTo(ctx context.Context, db DB, version int64) error {
	p, sqlDB, err := newProvider(db)
	if err != nil {
		return err
	}
	defer func() { _ = sqlDB.Close() }()
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if version >= current {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.DownTo(ctx, version)
	}
	return err
}

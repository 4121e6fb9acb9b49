package postgres

// PackRanks packs ranks as history_reports.ranks holds them, for the
// benchmark's row-by-row writer.
var PackRanks = packRanks

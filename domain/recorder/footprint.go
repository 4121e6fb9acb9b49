package recorder

import (
	"math/bits"
	"unsafe"

	"github.com/loadreporter/loadreporter/domain"
)

// footprint estimates the heap a report holds once the recorder has the
// only reference to it: the Report, its ranks' backing array (by
// capacity: that is what was allocated), and its strings, each rounded up
// as the Go allocator rounds it. A rank is a fixed 120-byte struct, so a
// wide engine's reports count by their width; the strings a fleet's
// reports share (worker address, model, source instance) are counted for
// each, which errs on the safe side by a few dozen bytes.
func footprint(r *domain.Report) int {
	n := allocSize(int(unsafe.Sizeof(*r))) + allocSize(cap(r.Ranks)*int(unsafe.Sizeof(domain.RankLoad{})))
	for _, s := range [...]string{r.SourceInstanceID, r.LastError, r.Worker.Addr, r.Worker.Model, r.Worker.Zone} {
		n += allocSize(len(s))
	}
	return n
}

// allocSize is n rounded up as the Go allocator rounds an allocation:
// small objects to a size class (classes are at most an eighth apart; this
// rounds to a sixteenth of the next power of two, at least 8 bytes, which
// lands on or just above the class), objects over 32 KiB to whole 8 KiB
// pages.
func allocSize(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n > 32<<10:
		return (n + 8191) &^ 8191
	}
	step := 1 << max(bits.Len(uint(n-1))-4, 4)
	return (n + step - 1) &^ (step - 1)
}

package domain

import (
	"slices"
	"strconv"
	"strings"
)

// RankSet is an immutable, sorted set of DP ranks. The zero value is the
// empty set, which as an expectation means "not known yet".
type RankSet struct {
	ranks []int64
}

// NewRankSet returns the set of the given ranks.
func NewRankSet(ranks ...int64) RankSet {
	s := slices.Clone(ranks)
	slices.Sort(s)
	return RankSet{ranks: slices.Compact(s)}
}

// RankRange returns {0, …, n-1}; n ≤ 0 gives the empty set.
func RankRange(n int) RankSet {
	if n <= 0 {
		return RankSet{}
	}
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return RankSet{ranks: s}
}

// Len is the number of ranks in the set.
func (s RankSet) Len() int { return len(s.ranks) }

// Empty reports whether the set has no rank.
func (s RankSet) Empty() bool { return len(s.ranks) == 0 }

// Ranks returns a copy of the ranks in ascending order.
func (s RankSet) Ranks() []int64 { return slices.Clone(s.ranks) }

// Equal reports whether both sets hold the same ranks.
func (s RankSet) Equal(o RankSet) bool { return slices.Equal(s.ranks, o.ranks) }

// Diff returns the ranks of s missing from o and the ranks of o not in s.
func (s RankSet) Diff(o RankSet) (missing, extra []int64) {
	i, j := 0, 0
	for i < len(s.ranks) || j < len(o.ranks) {
		switch {
		case j == len(o.ranks) || (i < len(s.ranks) && s.ranks[i] < o.ranks[j]):
			missing = append(missing, s.ranks[i])
			i++
		case i == len(s.ranks) || o.ranks[j] < s.ranks[i]:
			extra = append(extra, o.ranks[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}

// String renders the set as "[0 1 2]", at most MaxListedRanks of it.
func (s RankSet) String() string { return formatRanks(s.ranks) }

// MaxListedRanks bounds the ranks a message lists: a topology of tens of
// thousands of ranks must not put hundreds of KB into every report's
// last_error and every log line.
const MaxListedRanks = 8

// formatRanks renders "[0 1 2]", or "[0 1 … 7 … and 992 more]" past
// MaxListedRanks.
func formatRanks(ranks []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range ranks[:min(len(ranks), MaxListedRanks)] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(r, 10))
	}
	if more := len(ranks) - MaxListedRanks; more > 0 {
		b.WriteString(" … and " + strconv.Itoa(more) + " more")
	}
	b.WriteByte(']')
	return b.String()
}

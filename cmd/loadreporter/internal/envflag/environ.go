package envflag

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Environ is a getenv over a fixed environment that remembers which
// variables were asked for, so that a LOADREPORTER_* variable no flag of
// the command asked for (a typo, or another command's) can be named
// instead of silently ignored.
type Environ struct {
	vars  map[string]string
	names []string // the LOADREPORTER_* names set, in environment order
	asked map[string]bool
}

// NewEnviron reads environ, a list of KEY=value (os.Environ()).
func NewEnviron(environ []string) *Environ {
	e := &Environ{vars: map[string]string{}, asked: map[string]bool{}}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := e.vars[k]; !dup && strings.HasPrefix(k, Prefix) {
			e.names = append(e.names, k)
		}
		e.vars[k] = v
	}
	return e
}

// Getenv returns the variable's value, "" when unset, and remembers that
// name was asked for.
func (e *Environ) Getenv(name string) string {
	e.asked[name] = true
	return e.vars[name]
}

// Unknown returns one warning for each LOADREPORTER_* variable set that no
// flag of command asked for, naming the closest name one did ask for;
// nothing when nothing was asked for (the command read no flags).
func (e *Environ) Unknown(command string) []string {
	var known []string
	for name := range e.asked {
		if strings.HasPrefix(name, Prefix) {
			known = append(known, name)
		}
	}
	if len(known) == 0 {
		return nil
	}
	slices.Sort(known)
	var out []string
	for _, name := range e.names {
		if e.asked[name] {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not a setting of %s and is ignored (closest: %s)", name, command,
			strings.Join(closest(name, known), ", ")))
	}
	return out
}

// closest returns the names of known nearest to name: every one containing
// it or contained in it (LOADREPORTER_INTERVAL → LOADREPORTER_DETAIL_INTERVAL
// and LOADREPORTER_HISTORY_INTERVAL: which was meant cannot be told), else
// the one with the fewest edits. known is sorted.
func closest(name string, known []string) []string {
	stem := strings.TrimPrefix(name, Prefix)
	var around []string
	for _, k := range known {
		if ks := strings.TrimPrefix(k, Prefix); strings.Contains(ks, stem) || strings.Contains(stem, ks) {
			around = append(around, k)
		}
	}
	if len(around) > 0 {
		return around
	}
	edits := func(k string) int { return editDistance(stem, strings.TrimPrefix(k, Prefix)) }
	return []string{slices.MinFunc(known, func(a, b string) int { return cmp.Compare(edits(a), edits(b)) })}
}

// editDistance is Levenshtein's distance between a and b, by bytes (flag
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

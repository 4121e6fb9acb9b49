package sglanghttp

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/domain"
)

// FuzzParseLoads checks that no body makes the parser panic, that every
// error is one line, and that on success each integer field holds exactly
// the integral number the body carried. The committed corpus in
// testdata/fuzz/FuzzParseLoads runs as an ordinary test.
func FuzzParseLoads(f *testing.F) {
	for _, name := range []string{"sglang-v1-loads-core.json", "sglang-v1-loads-all.json", "sglang-v1-loads-legacy.json"} {
		f.Add([]byte(readFixture(f, name)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ranks, err := parseLoads(body)
		if err != nil {
			if msg := domain.ErrorMessage(err); msg == "internal error" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not a one-line *domain.Error: %q", err)
			}
			return
		}
		// The parse succeeded, so the body is one JSON object with a
		// non-empty "loads" list of objects: read it again independently.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("parseLoads accepted a body encoding/json rejects: %v", err)
		}
		loads, _ := doc["loads"].([]any)
		if len(loads) == 0 || len(ranks) != len(loads) {
			t.Fatalf("got %d ranks from %d loads entries", len(ranks), len(loads))
		}
		for i, item := range loads {
			obj := item.(map[string]any)
			r := ranks[i]
			checkInt(t, obj, "dp_rank", r.DPRank)
			for _, fld := range intFields {
				checkInt(t, obj, fld.key, *fld.dst(&r))
			}
		}
	})
}

// checkInt asserts that got is exactly the integer the JSON literal at key
// denotes (0 when absent or null), using exact rational arithmetic.
func checkInt(t *testing.T, obj map[string]any, key string, got int64) {
	t.Helper()
	v := obj[key]
	if v == nil {
		if got != 0 {
			t.Fatalf("%s absent or null but parsed as %d", key, got)
		}
		return
	}
	lit := string(v.(json.Number))
	if e := strings.IndexAny(lit, "eE"); e >= 0 {
		if exp, err := strconv.ParseInt(lit[e+1:], 10, 32); err != nil || exp > 1000 || exp < -1000 {
			// Too large for big.Rat to expand cheaply; only a zero
			// mantissa can be an int64 with such an exponent.
			if strings.Trim(lit[:e], "-0.") != "" || got != 0 {
				t.Fatalf("%s = %s parsed as %d", key, lit, got)
			}
			return
		}
	}
	var want big.Rat
	if _, ok := want.SetString(lit); !ok {
		t.Fatalf("%s = %s: big.Rat cannot read it", key, lit)
	}
	if !want.IsInt() || want.Num().Cmp(big.NewInt(got)) != 0 {
		t.Fatalf("%s = %s parsed as %d", key, lit, got)
	}
}

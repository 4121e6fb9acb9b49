package sglanghttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// The core per-rank keys (docs/sources.md, RankLoad fields 3–13 and num_total_tokens).
// A key that is absent or null reads as 0: older engines lack some of them.
// The two a router routes on first are required: every SGLang shape has
// them, and a rank without them (a proxy's stub, a renamed schema) read as
// an idle rank would draw all the traffic.
var (
	intFields = [...]struct {
		key      string
		dst      func(*domain.RankLoad) *int64
		required bool
	}{
		{"num_running_reqs", func(r *domain.RankLoad) *int64 { return &r.NumRunningReqs }, true},
		{"num_waiting_reqs", func(r *domain.RankLoad) *int64 { return &r.NumWaitingReqs }, true},
		{"num_waiting_uncached_tokens", func(r *domain.RankLoad) *int64 { return &r.NumWaitingUncachedTokens }, false},
		{"num_used_tokens", func(r *domain.RankLoad) *int64 { return &r.NumUsedTokens }, false},
		{"num_total_tokens", func(r *domain.RankLoad) *int64 { return &r.NumTotalTokens }, false},
		{"max_total_num_tokens", func(r *domain.RankLoad) *int64 { return &r.MaxTotalNumTokens }, false},
		{"max_running_requests", func(r *domain.RankLoad) *int64 { return &r.MaxRunningRequests }, false},
	}
	floatFields = [...]struct {
		key string
		dst func(*domain.RankLoad) *float64
	}{
		{"token_usage", func(r *domain.RankLoad) *float64 { return &r.TokenUsage }},
		{"gen_throughput", func(r *domain.RankLoad) *float64 { return &r.GenThroughput }},
		{"cache_hit_rate", func(r *domain.RankLoad) *float64 { return &r.CacheHitRate }},
		{"utilization", func(r *domain.RankLoad) *float64 { return &r.Utilization }},
	}
)

// maxTimestamp is the largest per-rank timestamp taken as seconds (about
// the year 5138). Anything larger is almost certainly milliseconds, which
// read as seconds would make the rank look fresh for ever.
const maxTimestamp = 1e11

// parseLoads reads a /v1/loads body into ranks, in the order the engine
// listed them. It checks only what parsing needs (shape, types, integers
// that are integers); consistency is domain.ValidateSnapshot's job.
func parseLoads(body []byte) ([]domain.RankLoad, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	// Numbers stay as their literal text so that 12 and 12.5 can be told
	// apart and 2^63 does not silently round.
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, jsonError(body, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, domain.Errorf(domain.CodeSourceFailed, "body is not valid JSON: data after the top-level value at offset %d", dec.InputOffset())
	}

	top, ok := doc.(map[string]any)
	if !ok {
		return nil, invalid("body is a JSON %s, want an object with a \"loads\" list", typeName(doc))
	}
	raw, ok := top["loads"]
	if !ok || raw == nil {
		return nil, invalid("response has no \"loads\" list")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, invalid("\"loads\" is %s %s, want a list", article(typeName(raw)), typeName(raw))
	}
	if len(list) == 0 {
		return nil, invalid("response has an empty \"loads\" list: the engine reported no ranks")
	}
	ranks := make([]domain.RankLoad, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, invalid("loads[%d] is %s %s, want an object", i, article(typeName(item)), typeName(item))
		}
		r, err := parseRank(i, obj)
		if err != nil {
			return nil, err
		}
		ranks[i] = r
	}
	return ranks, nil
}

func parseRank(i int, obj map[string]any) (domain.RankLoad, error) {
	var r domain.RankLoad
	v, ok := obj["dp_rank"]
	if !ok || v == nil {
		return r, invalid("loads[%d] has no dp_rank", i)
	}
	rank, err := intValue(v)
	if err != nil {
		return r, invalid("loads[%d]: dp_rank %s", i, err)
	}
	r.DPRank = rank

	for _, f := range intFields {
		v := obj[f.key]
		if v == nil {
			if f.required {
				return r, invalid("rank %d: %s is missing (every SGLang /v1/loads has it)", rank, f.key)
			}
			continue
		}
		n, err := intValue(v)
		if err != nil {
			return r, invalid("rank %d: %s %s", rank, f.key, err)
		}
		*f.dst(&r) = n
	}
	for _, f := range floatFields {
		v := obj[f.key]
		if v == nil {
			continue
		}
		x, err := floatValue(v)
		if err != nil {
			return r, invalid("rank %d: %s %s", rank, f.key, err)
		}
		*f.dst(&r) = x
	}
	if v := obj["timestamp"]; v != nil {
		sec, err := floatValue(v)
		if err != nil {
			return r, invalid("rank %d: timestamp %s", rank, err)
		}
		if sec > maxTimestamp {
			return r, invalid("rank %d: timestamp %s is too large for seconds since the epoch (milliseconds?)", rank, domain.Shorten(string(v.(json.Number)), 40))
		}
		// Zero or negative means "no time"; the report builder then uses
		// the pull-completion time, as it does for a missing timestamp.
		if sec > 0 {
			whole, frac := math.Modf(sec)
			r.SnapshotTime = time.Unix(int64(whole), int64(math.Round(frac*1e9)))
		}
	}
	return r, nil
}

// valueError completes a message that starts with a field's name.
type valueError string

func (e valueError) Error() string { return string(e) }

// intValue reads a JSON value where the engine's field is an integer: an
// integer literal, or a float literal whose value is exactly an integer
// (Python engines sometimes send 12.0), within int64.
func intValue(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, wrongType(v, "an integer")
	}
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	i, integral, inRange := exactInt(s)
	switch {
	case !integral:
		return 0, valueError(fmt.Sprintf("is a float (%s), want an integer", domain.Shorten(s, 40)))
	case !inRange:
		return 0, valueError(fmt.Sprintf("%s is outside the int64 range", domain.Shorten(s, 40)))
	}
	return i, nil
}

// exactInt reads a JSON number literal exactly, without going through
// float64: 1e-400 and 4503599627370496.5 are not integers even though they
// round to one, and 9223372036854775807.0 is one.
func exactInt(lit string) (v int64, integral, inRange bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, int64(0)
	if k := strings.IndexAny(lit, "eE"); k >= 0 {
		mant = lit[:k]
		exp = parseExponent(lit[k+1:])
	}
	digits := mant
	if dot := strings.IndexByte(mant, '.'); dot >= 0 {
		digits = mant[:dot] + mant[dot+1:]
		exp -= int64(len(mant) - dot - 1)
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, true, true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	if exp < 0 {
		return 0, false, false
	}
	if int64(len(digits))+exp > 19 {
		return 0, true, false
	}
	s := digits + strings.Repeat("0", int(exp))
	if neg {
		s = "-" + s
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, true, false
	}
	return i, true, true
}

// parseExponent reads a decimal exponent, clamping absurd ones to a size
// that still decides the outcome (integral or not, in range or not) without
// overflowing the arithmetic above.
func parseExponent(s string) int64 {
	const limit = 1 << 40
	e, err := strconv.ParseInt(s, 10, 64)
	if err != nil || e > limit || e < -limit {
		if strings.HasPrefix(s, "-") {
			return -limit
		}
		return limit
	}
	return e
}

// floatValue reads a JSON number where the engine's field is a ratio or a
// rate; integers are fine.
func floatValue(v any) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, wrongType(v, "a number")
	}
	x, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, valueError(fmt.Sprintf("%s is outside the float64 range", domain.Shorten(string(n), 40)))
	}
	return x, nil
}

func wrongType(v any, want string) error {
	if s, ok := v.(string); ok {
		return valueError(fmt.Sprintf("is a string (%q), want %s", domain.Shorten(s, 40), want))
	}
	return valueError(fmt.Sprintf("is %s %s, want %s", article(typeName(v)), typeName(v), want))
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func article(noun string) string {
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an"
	}
	return "a"
}

func invalid(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidSnapshot, format, args...)
}

// jsonError names why a body is not one JSON value, in terms an operator can
// act on: empty, cut short, or which byte is wrong.
func jsonError(body []byte, err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return domain.Errorf(domain.CodeSourceFailed, "empty response body, want JSON")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return domain.Errorf(domain.CodeSourceFailed, "truncated JSON body: unexpected EOF after %d bytes", len(body))
	case errors.As(err, &syn):
		if word, key, at := nonJSONNumber(body, syn.Offset); word != "" {
			if key != "" {
				return domain.Errorf(domain.CodeSourceFailed, "body is not valid JSON: %s is %s at offset %d (JSON has no NaN or Infinity)", key, word, at)
			}
			return domain.Errorf(domain.CodeSourceFailed, "body is not valid JSON: %s at offset %d (JSON has no NaN or Infinity)", word, at)
		}
		return domain.Errorf(domain.CodeSourceFailed, "body is not valid JSON: %s (offset %d)", domain.OneLine(syn.Error()), syn.Offset)
	}
	return domain.Errorf(domain.CodeSourceFailed, "body is not valid JSON: %s", domain.OneLine(err.Error()))
}

// nonJSONNumber recognises Python's json.dumps spellings of non-finite
// floats at a syntax error (the offset is just past the offending byte) and
// returns the word, the object key it is the value of (if any) and where it
// starts.
func nonJSONNumber(body []byte, offset int64) (word, key string, at int) {
	at = int(offset) - 1
	if at < 0 || at >= len(body) {
		return "", "", 0
	}
	for _, w := range []string{"NaN", "Infinity"} {
		if bytes.HasPrefix(body[at:], []byte(w)) {
			word = w
			break
		}
	}
	if word == "" {
		return "", "", 0
	}
	if at > 0 && body[at-1] == '-' {
		word = "-" + word
		at--
	}
	before := bytes.TrimRight(body[:at], " \t\r\n")
	if !bytes.HasSuffix(before, []byte(":")) {
		return word, "", at
	}
	before = bytes.TrimRight(before[:len(before)-1], " \t\r\n")
	if !bytes.HasSuffix(before, []byte(`"`)) {
		return word, "", at
	}
	before = before[:len(before)-1]
	open := bytes.LastIndexByte(before, '"')
	if open < 0 || len(before)-open > 64 {
		return word, "", at
	}
	return word, domain.Shorten(string(before[open+1:]), 40), at
}

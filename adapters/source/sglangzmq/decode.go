package sglangzmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// loadStatTag is the first element of every LoadStat body: msgspec's tag
// for a tagged, array-like struct.
const loadStatTag = "LoadStat"

// Positions in a LoadStat body. SGLang encodes the struct as a positional
// array and appends fields at the end, so a position never changes meaning.
const (
	posTag = iota
	posRunning
	posWaiting
	posTokens
	posMaxTokens
	posRank
	posUncached
	posTotalTokens
	posMaxRunning
	positionsRead // positions from here on (cumulative prefill counters, …) are not read
)

// minElements is how many elements a body must have: the tag and the four
// counts every SGLang that publishes load sends. attn_dp_rank and what
// follows it are optional.
const minElements = posMaxTokens + 1

// fieldNames name the positions in messages, as SGLang names the fields.
var fieldNames = [positionsRead]string{
	posTag:         "tag",
	posRunning:     "num_running_reqs",
	posWaiting:     "num_waiting_reqs",
	posTokens:      "num_tokens",
	posMaxTokens:   "max_total_num_tokens",
	posRank:        "attn_dp_rank",
	posUncached:    "num_waiting_uncached_tokens",
	posTotalTokens: "num_total_tokens",
	posMaxRunning:  "max_running_requests",
}

// optInt is an integer the body may leave out (too short an array) or send
// as null.
type optInt struct {
	v  int64
	ok bool
}

// loadStat is one decoded LoadStat body.
type loadStat struct {
	running, waiting, tokens, maxTokens int64

	rank        optInt // attn_dp_rank; unset means the socket's rank
	uncached    optInt
	totalTokens optInt
	maxRunning  optInt
}

// frames checks a message's three frames (topic, 8-byte big-endian
// sequence, body) and returns the sequence. ok is false, with no error,
// for a message on another topic that shares our topic as a prefix (ZMQ
// filters by prefix); such a message is not ours and is dropped.
func frames(f [][]byte, topic string) (seq uint64, ok bool, err error) {
	if len(f) == 0 || string(f[0]) != topic { // before the count: another topic's messages may have any shape
		return 0, false, nil
	}
	if len(f) != 3 {
		return 0, false, fmt.Errorf("message has %d frames, want 3 (topic, sequence, msgpack body)", len(f))
	}
	if len(f[1]) != 8 {
		return 0, false, fmt.Errorf("sequence frame is %d bytes, want 8 (big-endian)", len(f[1]))
	}
	return binary.BigEndian.Uint64(f[1]), true, nil
}

// decodeLoadStat decodes a LoadStat body by position: it needs the tag and
// the four counts, reads attn_dp_rank and the appended fields it knows when
// present, and ignores whatever a newer engine appends after them.
func decodeLoadStat(body []byte) (loadStat, error) {
	var st loadStat
	if len(body) == 0 {
		return st, errors.New("body is empty")
	}
	d := msgpack.NewDecoder(bytes.NewReader(body))
	c, err := d.PeekCode()
	if err != nil {
		return st, cutShort(err, "body")
	}
	if !isArray(c) {
		return st, fmt.Errorf("body is %s, want an array [%q, num_running_reqs, …]", describeCode(c, d), loadStatTag)
	}
	n, err := d.DecodeArrayLen()
	if err != nil {
		return st, cutShort(err, "body")
	}
	if n < minElements {
		return st, fmt.Errorf("body has %d elements, want at least %d ([%q, num_running_reqs, num_waiting_reqs, num_tokens, max_total_num_tokens, …])",
			n, minElements, loadStatTag)
	}
	if err := readTag(d); err != nil {
		return st, err
	}
	required := [...]*int64{posRunning: &st.running, posWaiting: &st.waiting, posTokens: &st.tokens, posMaxTokens: &st.maxTokens}
	for pos := posRunning; pos <= posMaxTokens; pos++ {
		v, err := readInt(d, pos)
		if err != nil {
			return st, err
		}
		if !v.ok {
			return st, fmt.Errorf("%s is null, want an integer", at(pos))
		}
		*required[pos] = v.v
	}
	optional := [...]*optInt{posRank: &st.rank, posUncached: &st.uncached, posTotalTokens: &st.totalTokens, posMaxRunning: &st.maxRunning}
	for pos := posRank; pos < min(n, positionsRead); pos++ {
		if *optional[pos], err = readInt(d, pos); err != nil {
			return st, err
		}
	}
	return st, nil
}

func readTag(d *msgpack.Decoder) error {
	c, err := d.PeekCode()
	if err != nil {
		return cutShort(err, at(posTag))
	}
	if !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
		return fmt.Errorf("%s is %s, want the string %q", at(posTag), describeCode(c, d), loadStatTag)
	}
	tag, err := d.DecodeString()
	if err != nil {
		return cutShort(err, at(posTag))
	}
	if tag != loadStatTag {
		return fmt.Errorf("%s is %q, want %q", at(posTag), short(tag), loadStatTag)
	}
	return nil
}

// readInt reads the integer at pos; null reads as unset. An integral float
// is accepted, as the HTTP source accepts one, since it carries the same
// number.
func readInt(d *msgpack.Decoder, pos int) (optInt, error) {
	c, err := d.PeekCode()
	if err != nil {
		return optInt{}, cutShort(err, at(pos))
	}
	if c == msgpcode.Nil {
		_ = d.Skip()
		return optInt{}, nil
	}
	if !isNumber(c) {
		return optInt{}, fmt.Errorf("%s is %s, want an integer", at(pos), describeCode(c, d))
	}
	v, err := d.DecodeInterfaceLoose()
	if err != nil {
		return optInt{}, cutShort(err, at(pos))
	}
	switch v := v.(type) {
	case int64:
		return optInt{v, true}, nil
	case uint64:
		if v > math.MaxInt64 {
			return optInt{}, fmt.Errorf("%s %d is outside the int64 range", at(pos), v)
		}
		return optInt{int64(v), true}, nil
	case float64:
		switch {
		case v != math.Trunc(v) || math.IsInf(v, 0):
			return optInt{}, fmt.Errorf("%s is a float (%s), want an integer", at(pos), formatFloat(v))
		case v < math.MinInt64 || v >= math.MaxInt64:
			return optInt{}, fmt.Errorf("%s %s is outside the int64 range", at(pos), formatFloat(v))
		}
		return optInt{int64(v), true}, nil
	}
	return optInt{}, fmt.Errorf("%s is %T, want an integer", at(pos), v)
}

// at names a position: body[3] (num_tokens).
func at(pos int) string {
	return fmt.Sprintf("body[%d] (%s)", pos, fieldNames[pos])
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isNumber(c byte) bool {
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64,
		msgpcode.Float, msgpcode.Double:
		return true
	}
	return msgpcode.IsFixedNum(c)
}

// describeCode names the type of the value about to be read, with the value
// itself when it is short and printable, for messages.
func describeCode(c byte, d *msgpack.Decoder) string {
	switch {
	case c == msgpcode.Nil:
		return "null"
	case c == msgpcode.True || c == msgpcode.False:
		return "a bool"
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		if s, err := d.DecodeString(); err == nil {
			return fmt.Sprintf("a string (%q)", short(s))
		}
		return "a string"
	case isArray(c):
		return "an array"
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return "a map"
	case msgpcode.IsExt(c):
		return "an extension value"
	case isNumber(c):
		return "a number"
	}
	return fmt.Sprintf("not msgpack (code 0x%02x)", c)
}

// cutShort names a read that ran out of bytes, or another decoder failure.
func cutShort(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("body is cut short at %s", what)
	}
	return fmt.Errorf("body is not valid msgpack at %s: %v", what, err)
}

// short keeps a peer-supplied string in a message short and on one line.
func short(s string) string { return domain.Shorten(s, 40) }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

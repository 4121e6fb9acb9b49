package sglangzmq

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// fixtureMessage is one message of testdata/sglang-zmq-loadstat.json.
type fixtureMessage struct {
	Note    string   `json:"note"`
	Frames  [][]byte `json:"-"`
	Hex     []string `json:"frames_hex"`
	Decoded []any    `json:"decoded"`
}

func readFixture(t testing.TB) []fixtureMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sglang-zmq-loadstat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Messages []fixtureMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for i := range f.Messages {
		m := &f.Messages[i]
		for _, h := range m.Hex {
			frame, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("%s: %v", m.Note, err)
			}
			m.Frames = append(m.Frames, frame)
		}
	}
	if len(f.Messages) != 3 {
		t.Fatalf("fixture has %d messages, want 3", len(f.Messages))
	}
	return f.Messages
}

// TestDecodeFixture decodes SGLang's three shapes and checks every value
// against the fixture's own decoding, position by position, so the field
// order is SGLang's.
func TestDecodeFixture(t *testing.T) {
	opt := func(v any) optInt {
		if v == nil {
			return optInt{}
		}
		return optInt{int64(v.(float64)), true}
	}
	for _, m := range readFixture(t) {
		t.Run(m.Note, func(t *testing.T) {
			seq, ours, err := frames(m.Frames, "load")
			if err != nil || !ours || seq != 7 {
				t.Fatalf("frames: seq %d, ours %v, err %v; want 7, true, nil", seq, ours, err)
			}
			got, err := decodeLoadStat(m.Frames[2])
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			d := m.Decoded
			if d[0] != loadStatTag {
				t.Fatalf("fixture tag %v", d[0])
			}
			want := loadStat{
				running: opt(d[posRunning]).v, waiting: opt(d[posWaiting]).v,
				tokens: opt(d[posTokens]).v, maxTokens: opt(d[posMaxTokens]).v,
				rank: opt(d[posRank]),
			}
			if len(d) > posMaxRunning {
				want.uncached, want.totalTokens, want.maxRunning = opt(d[posUncached]), opt(d[posTotalTokens]), opt(d[posMaxRunning])
			}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			// The body is exactly what the fixture says it decodes to.
			var generic []any
			if err := msgpack.Unmarshal(m.Frames[2], &generic); err != nil || len(generic) != len(d) {
				t.Fatalf("fixture body: %v, %d elements, want %d", err, len(generic), len(d))
			}
		})
	}
}

func TestDecodeForms(t *testing.T) {
	tests := []struct {
		name string
		body []any
		want loadStat
	}{
		{"the four counts only", []any{loadStatTag, 1, 2, 3, 4}, loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4}},
		{"null rank", []any{loadStatTag, 1, 2, 3, 4, nil}, loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4}},
		{"unsigned and negative", []any{loadStatTag, uint64(1), int8(-2), uint32(70000), int64(-1)},
			loadStat{running: 1, waiting: -2, tokens: 70000, maxTokens: -1}},
		{"integral float", []any{loadStatTag, 1.0, float32(2), 3, 4}, loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4}},
		{"appended nulls", []any{loadStatTag, 1, 2, 3, 4, 5, nil, nil, nil},
			loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4, rank: optInt{5, true}}},
		{"a future engine's extra elements of any type", []any{loadStatTag, 1, 2, 3, 4, 0, 6, 7, 8, 9.5, "new", []any{1}, map[string]any{"k": 1}},
			loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4, rank: optInt{0, true},
				uncached: optInt{6, true}, totalTokens: optInt{7, true}, maxRunning: optInt{8, true}}},
		{"binary tag", []any{[]byte(loadStatTag), 1, 2, 3, 4}, loadStat{running: 1, waiting: 2, tokens: 3, maxTokens: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := msgpack.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeLoadStat(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := enc([]any{loadStatTag, 1, 2, 3, 4, 0})
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "body is empty"},
		{"not msgpack", []byte{0xc1, 0x00}, `body is not msgpack (code 0xc1), want an array ["LoadStat", num_running_reqs, …]`},
		{"a map", enc(map[string]int{"num_running_reqs": 1}), `body is a map, want an array ["LoadStat", num_running_reqs, …]`},
		{"a string", enc("LoadStat"), `body is a string ("LoadStat"), want an array ["LoadStat", num_running_reqs, …]`},
		{"null", enc(nil), `body is null, want an array ["LoadStat", num_running_reqs, …]`},
		{"too short", enc([]any{loadStatTag, 1, 2, 3}),
			`body has 4 elements, want at least 5 (["LoadStat", num_running_reqs, num_waiting_reqs, num_tokens, max_total_num_tokens, …])`},
		{"cut short", ok[:len(ok)-2], "body is cut short at body[4] (max_total_num_tokens)"},
		{"cut short in the tag", ok[:4], "body is cut short at body[0] (tag)"},
		{"another tag", enc([]any{"KVStat", 1, 2, 3, 4}), `body[0] (tag) is "KVStat", want "LoadStat"`},
		{"untagged", enc([]any{1, 2, 3, 4, 5}), `body[0] (tag) is a number, want the string "LoadStat"`},
		{"string count", enc([]any{loadStatTag, 1, "three", 3, 4}), `body[2] (num_waiting_reqs) is a string ("three"), want an integer`},
		{"fractional count", enc([]any{loadStatTag, 1.5, 2, 3, 4}), "body[1] (num_running_reqs) is a float (1.5), want an integer"},
		{"NaN count", enc([]any{loadStatTag, 1, 2, math.NaN(), 4}), "body[3] (num_tokens) is a float (NaN), want an integer"},
		{"huge float", enc([]any{loadStatTag, 1, 2, 3, 1e30}), "body[4] (max_total_num_tokens) 1e+30 is outside the int64 range"},
		{"beyond int64", enc([]any{loadStatTag, 1, 2, uint64(math.MaxUint64), 4}), "body[3] (num_tokens) 18446744073709551615 is outside the int64 range"},
		{"null count", enc([]any{loadStatTag, 1, nil, 3, 4}), "body[2] (num_waiting_reqs) is null, want an integer"},
		{"bool rank", enc([]any{loadStatTag, 1, 2, 3, 4, true}), "body[5] (attn_dp_rank) is a bool, want an integer"},
		{"array where a count belongs", enc([]any{loadStatTag, 1, 2, 3, 4, 0, []int{1}}), "body[6] (num_waiting_uncached_tokens) is an array, want an integer"},
		{"map where a count belongs", enc([]any{loadStatTag, 1, 2, 3, 4, 0, 1, 2, map[string]int{}}), "body[8] (max_running_requests) is a map, want an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeLoadStat(tt.body)
			if err == nil {
				t.Fatalf("decoded %+v, want error %q", got, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error %q\nwant  %q", err, tt.want)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	seq := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	tests := []struct {
		name    string
		frames  [][]byte
		wantSeq uint64
		ours    bool
		wantErr string
	}{
		{"ours", [][]byte{[]byte("load"), seq, {0x90}}, 0x0102030405060708, true, ""},
		{"a longer topic with ours as prefix", [][]byte{[]byte("loadX"), seq, {0x90}}, 0, false, ""},
		{"a longer topic's message of two frames", [][]byte{[]byte("load_events"), seq}, 0, false, ""},
		{"no frame at all", nil, 0, false, ""},
		{"two frames", [][]byte{[]byte("load"), seq}, 0, false, "message has 2 frames, want 3 (topic, sequence, msgpack body)"},
		{"four frames", [][]byte{[]byte("load"), seq, {0x90}, {}}, 0, false, "message has 4 frames, want 3 (topic, sequence, msgpack body)"},
		{"short sequence", [][]byte{[]byte("load"), {0, 0, 0, 7}, {0x90}}, 0, false, "sequence frame is 4 bytes, want 8 (big-endian)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ours, err := frames(tt.frames, "load")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.wantSeq || ours != tt.ours {
				t.Errorf("frames = %#x, %v, %v; want %#x, %v, nil", got, ours, err, tt.wantSeq, tt.ours)
			}
		})
	}
}

package domain

import "testing"

func TestOneLine(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"  lead and trail \n", "lead and trail"},
		{"a\r\n\tb   c", "a b c"},
		{"nul\x00and\x1bescape", "nul and escape"},
		{"bad \xff\xfe utf-8", "bad \uFFFD utf-8"},
		{"no-break\u00a0space\u2028line", "no-break space line"},
	}
	for _, tt := range tests {
		if got := OneLine(tt.in); got != tt.want {
			t.Errorf("OneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"a\nb", 10, "a b"},
		{"0123456789abc", 10, "0123456789…"},
		{"ééééé", 3, "é…"}, // never cut inside a rune
	} {
		if got := Shorten(tc.in, tc.max); got != tc.want {
			t.Errorf("Shorten(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestTextProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"zone-a ü", ""},
		{"bad \xff", "is not valid UTF-8"},
		{"nul\x00", "contains a NUL byte"},
		{"both\x00\xff", "is not valid UTF-8"},
	} {
		if got := TextProblem(tc.in); got != tc.want {
			t.Errorf("TextProblem(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

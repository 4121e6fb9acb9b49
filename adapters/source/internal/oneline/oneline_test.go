package oneline

import "testing"

func TestString(t *testing.T) {
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
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

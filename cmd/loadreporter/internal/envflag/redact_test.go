package envflag

import (
	"slices"
	"strings"
	"testing"
)

// TestRedactURLHidesEveryPassword: each place a connection string can
// carry a password is hidden, in URL and in keyword/value form, and the
// rest is left as written so the operator recognises the value.
func TestRedactURLHidesEveryPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		// URL form: user-info, and the query parameters the driver reads.
		{"postgres://u:S3cretPW@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u@h/db?sslmode=disable&password=S3cretPW", "postgres://u@h/db?sslmode=disable&password=xxxxx"},
		{"postgresql://h/db?sslpassword=S3cretPW&password=S3cretPW&passfile=/x", "postgresql://h/db?sslpassword=xxxxx&password=xxxxx&passfile=/x"},
		{"postgres://h/db?pass%77ord=S3cretPW", "postgres://h/db?pass%77ord=xxxxx"},
		{"postgres://h?password=S3cretPW#frag", "postgres://h?password=xxxxx#frag"},
		// Several hosts, which url.Parse refuses and the driver accepts.
		{"postgres://u:S3cretPW@h1:5432,h2/db?password=S3cretPW", "postgres://u:xxxxx@h1:5432,h2/db?password=xxxxx"},
		// Unescaped '@', '?' or '/' in a password: more is hidden, never less.
		{"postgres://u:S3c@retPW@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:1?S3cretPW@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:S3c/retPW@h/db", "postgres://u:xxxxx@h/db"},
		// Keyword/value form, bare or quoted, with spaces around '='.
		{"host=127.0.0.1 port=1 password=S3cretPW", "host=127.0.0.1 port=1 password=xxxxx"},
		{"host=h password='a b S3cretPW' dbname=d", "host=h password=xxxxx dbname=d"},
		{`password='it\'s S3cretPW' user=u`, "password=xxxxx user=u"},
		{`password=S3cret\ PW user=u`, "password=xxxxx user=u"},
		{"host=h password = S3cretPW sslpassword='S3cretPW'", "host=h password = xxxxx sslpassword=xxxxx"},
		{"junk host=h password=S3cretPW", "junk host=h password=xxxxx"},
		{"host=h password='S3cretPW never closed", "host=h password=xxxxx"},
		// Nothing to hide: unchanged.
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"postgres://h:5432/db?application_name=a@b", "postgres://h:5432/db?application_name=a@b"},
		{"host=h user=u dbname=d passfile=/p", "host=h user=u dbname=d passfile=/p"},
		{"", ""},
	} {
		got := RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "S3c") || strings.Contains(got, "retPW") {
			t.Errorf("RedactURL(%q) = %q shows the password", tc.in, got)
		}
	}
}

// TestPasswords: a password is given as written and as the driver reads
// it, so a message quoting either form can be cleaned.
func TestPasswords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"postgres://u:p%40ss@h/db?password=a+b", []string{"p%40ss", "p@ss", "a+b", "a b"}},
		{`host=h password='a \'b'`, []string{`'a \'b'`, "a 'b"}},
		{"host=h password=pw", []string{"pw"}},
		{"host=h password=pw sslpassword=pw", []string{"pw"}},
		{"postgres://u@h/db", nil},
	} {
		if got := Passwords(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Passwords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

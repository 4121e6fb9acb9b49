package envflag

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// mask stands for a hidden password, as url.URL.Redacted writes it.
const mask = "xxxxx"

// passwordKeys are the connection settings that hold a secret, in a URL's
// query or a keyword/value string (libpq's spelling, which pgx reads).
var passwordKeys = []string{"password", "sslpassword"}

// urlScheme opens a value in URL form ("postgres://…"); anything else is
// read as libpq keyword/value settings ("host=h password=pw").
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// RedactURL hides every password in a URL or keyword/value connection
// string (a --database-url), so errors and logs that name it do not leak
// it: a URL's user-info password and its password or sslpassword query
// values, or the value of a password or sslpassword keyword, quoted or
// not. Everything else is kept as written, to be recognised.
func RedactURL(raw string) string {
	var b strings.Builder
	last := 0
	for _, s := range secretSpans(raw) {
		b.WriteString(raw[last:s.start])
		b.WriteString(mask)
		last = s.end
	}
	b.WriteString(raw[last:])
	return b.String()
}

// Passwords are the passwords RedactURL hides in raw, each as written
// and as the driver reads it (decoded, unquoted), so a message that
// quotes one can be cleaned too.
func Passwords(raw string) []string {
	var out []string
	for _, s := range secretSpans(raw) {
		for _, p := range []string{raw[s.start:s.end], s.value} {
			if p != "" && p != mask && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// span is raw[start:end], a secret as written, and value, the secret as
// the driver reads it.
type span struct {
	start, end int
	value      string
}

func secretSpans(raw string) []span {
	if urlScheme.MatchString(raw) {
		return urlSecrets(raw)
	}
	return keywordSecrets(raw)
}

// urlSecrets finds the user-info password and the password query values
// of a URL. It walks the text rather than trusting url.Parse, which
// refuses what the driver accepts (several hosts, "h1:5432,h2") and
// splits a malformed user-info differently; where the two could disagree
// it hides more, not less.
func urlSecrets(raw string) []span {
	var out []span
	rest := urlScheme.FindStringIndex(raw)[1]
	// The user-info ends at the last '@' before the path; a password may
	// hold an unescaped '@' or '?'.
	hostEnd := len(raw)
	if i := strings.IndexByte(raw[rest:], '/'); i >= 0 {
		hostEnd = rest + i
	}
	at := strings.LastIndexByte(raw[rest:hostEnd], '@')
	if _, err := url.Parse(raw); at < 0 && err != nil {
		// Malformed: an unescaped '/' in a password hides the user-info
		// from the walk above.
		at = strings.LastIndexByte(raw[rest:], '@')
	}
	if at >= 0 {
		userinfo := raw[rest : rest+at]
		if colon := strings.IndexByte(userinfo, ':'); colon >= 0 {
			pw := userinfo[colon+1:]
			out = append(out, span{start: rest + colon + 1, end: rest + at, value: unescape(pw, url.PathUnescape)})
		}
		rest += at + 1
	}
	q := strings.IndexByte(raw[rest:], '?')
	if q < 0 {
		return out
	}
	start := rest + q + 1
	end := len(raw)
	if f := strings.IndexByte(raw[start:], '#'); f >= 0 {
		end = start + f
	}
	for pos := start; pos <= end; {
		next := strings.IndexByte(raw[pos:end], '&')
		if next < 0 {
			next = end - pos
		}
		pair := raw[pos : pos+next]
		if key, value, ok := strings.Cut(pair, "="); ok && isPasswordKey(unescape(key, url.QueryUnescape)) {
			vstart := pos + len(key) + 1
			out = append(out, span{start: vstart, end: vstart + len(value), value: unescape(value, url.QueryUnescape)})
		}
		pos += next + 1
	}
	return out
}

// keywordSecrets finds the password values of libpq keyword/value
// settings: key = value, the value bare up to a space or in single
// quotes, a backslash escaping the next character. A value whose quote
// never closes runs to the end. Text that is no setting is skipped, so a
// typo earlier does not hide a password later from the walk.
func keywordSecrets(raw string) []span {
	var out []span
	isSpace := func(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 }
	skipSpace := func(i int) int {
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		return i
	}
	for i := skipSpace(0); i < len(raw); i = skipSpace(i) {
		keyStart := i
		for i < len(raw) && !isSpace(raw[i]) && raw[i] != '=' {
			i++
		}
		key := raw[keyStart:i]
		if j := skipSpace(i); j < len(raw) && raw[j] == '=' {
			i = skipSpace(j + 1)
		} else {
			continue // no '=': not a setting
		}
		valueStart, quoted := i, i < len(raw) && raw[i] == '\''
		if quoted {
			i++
		}
		var value strings.Builder
		for i < len(raw) {
			c := raw[i]
			if quoted && c == '\'' {
				i++
				break
			}
			if !quoted && isSpace(c) {
				break
			}
			if c == '\\' && i+1 < len(raw) {
				i++
				c = raw[i]
			}
			value.WriteByte(c)
			i++
		}
		if isPasswordKey(key) {
			out = append(out, span{start: valueStart, end: i, value: value.String()})
		}
	}
	return out
}

func isPasswordKey(key string) bool {
	for _, k := range passwordKeys {
		if strings.EqualFold(strings.TrimSpace(key), k) {
			return true
		}
	}
	return false
}

// unescape decodes s, or keeps it as written when it is no valid escape.
func unescape(s string, decode func(string) (string, error)) string {
	if d, err := decode(s); err == nil {
		return d
	}
	return s
}

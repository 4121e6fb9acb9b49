package httpfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/loadreporter/loadreporter/domain"
)

// Options configure a Fetcher. Query, APIKey, Client and Accept may be left
// unset; the other strings must be set, since they are the words the
// operator reads in messages.
type Options struct {
	// Name names the source in String and in messages, e.g. "sglang-http".
	Name string
	// BaseURL is the server's address as the operator gave it (the value of
	// URLFlag). A path prefix is kept, for servers behind a proxy that
	// mounts them under one; a #fragment is refused, and so is a query
	// unless the path ends in Path. A URL whose path ends in Path (the
	// endpoint's own URL, as people copy it) counts as the base URL before
	// it: its query, if any, is replaced by Query.
	BaseURL string
	// URLFlag is the flag BaseURL comes from, e.g. "--engine-url".
	URLFlag string
	// Example is a BaseURL to suggest when BaseURL is empty.
	Example string
	// Peer is what BaseURL addresses, as messages call it: "engine" or
	// "server".
	Peer string
	// Path is the endpoint, appended to BaseURL's path, e.g. "/v1/loads";
	// Query is its fixed query without the "?", or "".
	Path, Query string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>";
	// APIKeyFlag is the flag it comes from, e.g. "--engine-api-key".
	APIKey, APIKeyFlag string
	// Client is the HTTP client to use. When nil, the Fetcher makes one
	// client of its own and reuses it, so connections to the server are
	// kept alive between requests. A Client.Timeout is allowed but never
	// needed: each Get ends when its context ends.
	Client *http.Client
	// MaxBodyBytes bounds a response body; it must be > 0. Sources pass
	// their own default for an unset option.
	MaxBodyBytes int64
	// Accept, when set, is sent as the Accept header.
	Accept string
}

// Fetcher GETs one URL. It is safe for concurrent use; it keeps no state
// between requests besides the HTTP connection pool.
type Fetcher struct {
	name      string
	url       string // full request URL
	shownURL  string // url with any password redacted, for messages
	auth      string // Authorization header value, or ""
	accept    string
	client    *http.Client
	ownClient bool
	maxBody   int64
}

// New validates o and returns a Fetcher. Problems are reported with code
// domain.CodeInvalidArgument and name the flag the operator has to fix, in
// this order: the base URL, the API key, the body bound.
func New(o Options) (*Fetcher, error) {
	u, err := parseBaseURL(o)
	if err != nil {
		return nil, err
	}
	if strings.IndexFunc(o.APIKey, unicode.IsControl) >= 0 {
		// net/http would refuse the header on every request; say it once, here.
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s contains a control character", o.APIKeyFlag)
	}
	if o.MaxBodyBytes <= 0 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s max body bytes must be > 0, got %d", o.Name, o.MaxBodyBytes)
	}
	u.Path = strings.TrimRight(u.Path, "/") + o.Path
	u.RawPath = ""
	u.RawQuery = o.Query
	f := &Fetcher{
		name: o.Name, url: u.String(), shownURL: u.Redacted(),
		accept: o.Accept, client: o.Client, maxBody: o.MaxBodyBytes,
	}
	if o.APIKey != "" {
		f.auth = "Bearer " + o.APIKey
	}
	if f.client == nil {
		// Our own pool rather than http.DefaultClient's, so Close can drop
		// idle connections without touching anyone else's.
		f.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		f.ownClient = true
	} else {
		c := *f.client
		f.client = &c
	}
	// A redirect is answered, not followed: the engine's URL is configured,
	// and net/http would send the API key to another port of the same host,
	// or over plain HTTP, and read whatever path it names as the loads.
	f.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return f, nil
}

func parseBaseURL(o Options) (*url.URL, error) {
	raw := o.BaseURL
	if strings.TrimSpace(raw) == "" {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s is required for the %s source (for example %s)", o.URLFlag, o.Name, o.Example)
	}
	u, err := url.Parse(raw)
	if hint, ok := schemeHint(raw, err, u); ok {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: add the scheme, e.g. %s", o.URLFlag, strings.TrimPrefix(hint, "http://"), hint)
	}
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: %v", o.URLFlag, raw, err)
	}
	// The URL people copy names the endpoint itself (…/metrics,
	// …/v1/loads?include=core): take it for the base URL it ends in.
	endpoint := o.Path != "" && strings.HasSuffix(strings.TrimRight(u.Path, "/"), o.Path)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: scheme must be http or https", o.URLFlag, u.Redacted())
	case u.Host == "":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: no host", o.URLFlag, u.Redacted())
	case (u.RawQuery != "" || u.ForceQuery) && !endpoint:
		endpoint := o.Path
		if o.Query != "" {
			endpoint += "?" + o.Query
		}
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: give the %s's base URL without a query; %s is added", o.URLFlag, u.Redacted(), o.Peer, endpoint)
	case u.Fragment != "":
		return nil, domain.Errorf(domain.CodeInvalidArgument, "%s %q: must not have a #fragment", o.URLFlag, u.Redacted())
	}
	if endpoint {
		u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), o.Path)
		u.RawQuery, u.ForceQuery = "", false
	}
	return u, nil
}

// schemeHint returns raw with "http://" in front (password redacted) when
// raw lacks a scheme and would be a valid URL with one: "127.0.0.1:30000"
// does not parse, and "localhost:30000" parses with "localhost" for its
// scheme.
func schemeHint(raw string, parseErr error, u *url.URL) (string, bool) {
	if strings.Contains(raw, "://") || (parseErr == nil && (u.Scheme == "http" || u.Scheme == "https")) {
		return "", false
	}
	withScheme, err := url.Parse("http://" + raw)
	if err != nil || withScheme.Host == "" {
		return "", false
	}
	return withScheme.Redacted(), true
}

// URL returns the URL requests go to, with any password redacted.
func (f *Fetcher) URL() string { return f.shownURL }

// String describes the source for logs; it never shows the API key.
func (f *Fetcher) String() string { return f.name + " " + f.shownURL }

// Close drops idle connections of the client the Fetcher made itself; a
// caller-supplied Client is left alone.
func (f *Fetcher) Close() error {
	if f.ownClient {
		f.client.CloseIdleConnections()
	}
	return nil
}

// Get returns the body of one successful (2xx) response, at most
// MaxBodyBytes long. It returns when ctx ends even if the server stalls
// mid-body.
func (f *Fetcher) Get(ctx context.Context) ([]byte, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: %s", f.shownURL, domain.OneLine(err.Error()))
	}
	if f.accept != "" {
		req.Header.Set("Accept", f.accept)
	}
	if f.auth != "" {
		req.Header.Set("Authorization", f.auth)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.transportError(ctx, start, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := readSnippet(resp.Body)
		msg := fmt.Sprintf("GET %s: HTTP %s", f.shownURL, statusText(resp))
		if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
			msg += fmt.Sprintf(" to %s: redirects are not followed; give the engine's own URL", redactedLocation(loc))
		}
		if snippet != "" {
			msg += ": " + snippet
		}
		return nil, domain.Errorf(domain.CodeSourceFailed, "%s", msg)
	}
	// net/http undoes the gzip it asked for and drops the header; any
	// other encoding is still on, and would read as a garbled body.
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: the engine answered with Content-Encoding %q, which the reporter does not decode (it accepts gzip or none)",
			f.shownURL, domain.Shorten(ce, 40))
	}
	if resp.ContentLength > f.maxBody {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: response body exceeds %d bytes (Content-Length %d)", f.shownURL, f.maxBody, resp.ContentLength)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBody+1))
	if err != nil {
		return nil, f.transportError(ctx, start, err)
	}
	if int64(len(body)) > f.maxBody {
		return nil, domain.Errorf(domain.CodeSourceFailed, "GET %s: response body exceeds %d bytes", f.shownURL, f.maxBody)
	}
	return body, nil
}

// transportError names a failed request or body read. When ctx has ended,
// the cause is the deadline, whatever net/http wrapped it in; the returned
// error then also matches context.DeadlineExceeded or context.Canceled so the
// fire loop can classify it as a timeout.
func (f *Fetcher) transportError(ctx context.Context, start time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return domain.PullEnded("GET "+f.shownURL, cerr, time.Since(start))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its text repeats the URL, quoted
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return domain.Errorf(domain.CodeSourceFailed, "GET %s: response body cut short: %v", f.shownURL, err)
	}
	return domain.Errorf(domain.CodeSourceFailed, "GET %s: %s", f.shownURL, domain.OneLine(err.Error()))
}

// redactedLocation is a redirect's target as an error may show it: without
// a password, on one short line.
func redactedLocation(loc string) string {
	if u, err := url.Parse(loc); err == nil {
		loc = u.Redacted()
	}
	return domain.Shorten(domain.OneLine(loc), snippetBytes)
}

func statusText(resp *http.Response) string {
	if resp.Status != "" {
		return domain.OneLine(resp.Status)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}

// snippetBytes bounds what an error body contributes to last_error.
const snippetBytes = 200

// readSnippet returns the start of an error body on one line. It reads at
// most one byte more than it shows, so a huge or endless error body costs
// nothing; a read error just shortens the snippet.
func readSnippet(r io.Reader) string {
	buf, _ := io.ReadAll(io.LimitReader(r, snippetBytes+1))
	cut := len(buf) > snippetBytes
	if cut {
		buf = buf[:snippetBytes]
	}
	s := domain.OneLine(string(buf))
	if cut && s != "" {
		s += "…"
	}
	return s
}

package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// LiveSource is what the live page reads: a recent report and how many
// routers are connected. Both are called once per page load, from request
// goroutines, and must be safe for concurrent use.
type LiveSource interface {
	// Latest returns a recent report, or nil when there is none: without
	// a script the page is only as live as this answer, so a source whose
	// latest report is old pulls a new one (within ctx) when nothing else
	// does. The report is shared and must not be modified.
	Latest(ctx context.Context) *domain.Report
	// RoutersConnected returns the number of live Monitor sessions.
	RoutersConnected() int
}

// Defaults for Options.
const (
	DefaultHistoryInterval = time.Second
	DefaultWatchInterval   = time.Second
	DefaultRefresh         = 5 * time.Second
	DefaultQueryTimeout    = 15 * time.Second
)

// Options configure a Handler.
type Options struct {
	// Live is required.
	Live LiveSource
	// History answers the history and audit pages; nil means history is
	// off, and those pages say so (404).
	History ports.HistoryQuery
	// Chart counts the history page's charts; required with History.
	Chart ports.HistoryChart
	// Now is the clock for windows like "last 15 min" and for ages;
	// default time.Now.
	Now func() time.Time
	// Version is the build's one line (loadreporter --version), shown in
	// every page's footer; empty shows none.
	Version string
	// Worker is this process's worker identity: shown on the live page
	// before the first report, and the default worker filter of the
	// history and audit pages (so a database shared by a fleet shows this
	// worker unless asked otherwise).
	Worker domain.Worker
	// HistoryInterval is --history-interval: the default interval of the
	// gaps query, and how far apart recorded reports may be before the
	// charts break their lines. Default DefaultHistoryInterval.
	HistoryInterval time.Duration
	// WatchInterval is the report interval the live page's script asks
	// Watch for; default DefaultWatchInterval. It must lie within the
	// server's accepted report intervals.
	WatchInterval time.Duration
	// Refresh is how often the live page reloads itself when JavaScript is
	// off; default DefaultRefresh, at least one second.
	Refresh time.Duration
	// QueryTimeout bounds the history queries of one page; default
	// DefaultQueryTimeout.
	QueryTimeout time.Duration
	// Logger receives errors that a page can only show as "internal
	// error"; default slog.Default().
	Logger *slog.Logger
}

// Handler serves the dashboard. It is an http.Handler for the routes
// listed in the package documentation.
type Handler struct {
	o      Options
	mux    *http.ServeMux
	style  string
	script string
}

//go:embed static
var staticFS embed.FS

// New validates o, fills defaults and returns the dashboard handler.
func New(o Options) (*Handler, error) {
	if o.Live == nil {
		return nil, errors.New("web: Options.Live is required")
	}
	if o.History != nil && o.Chart == nil {
		return nil, errors.New("web: Options.Chart is required with Options.History")
	}
	if o.HistoryInterval < 0 || o.WatchInterval < 0 || o.Refresh < 0 || o.QueryTimeout < 0 {
		return nil, errors.New("web: negative interval in Options")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HistoryInterval == 0 {
		o.HistoryInterval = DefaultHistoryInterval
	}
	if o.WatchInterval == 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	o.Refresh = max(o.Refresh, time.Second)
	if o.QueryTimeout == 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	var err error
	if h.style, err = AssetURL("style.css"); err != nil {
		return nil, err
	}
	if h.script, err = AssetURL("live.js"); err != nil {
		return nil, err
	}
	h.mux.Handle("GET /static/", Static())
	h.mux.HandleFunc("GET /{$}", h.serveLive)
	h.mux.HandleFunc("GET /history", h.serveHistory)
	h.mux.HandleFunc("GET /audit", h.serveAudit)
	h.mux.HandleFunc("GET /audit.csv", h.serveAuditCSV)
	return h, nil
}

// Patterns are the http.ServeMux patterns the dashboard serves.
func (h *Handler) Patterns() []string {
	return []string{"GET /{$}", "GET /history", "GET /audit", "GET /audit.csv", "GET /static/"}
}

// Register adds the dashboard's patterns to mux, so that it shares a mux
// with the RPC handlers without taking over every path.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, p := range h.Patterns() {
		mux.Handle(p, h)
	}
}

// ServeHTTP serves the dashboard's routes; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Static serves the embedded assets (style.css, live.js, fleet.js) at
// /static/<name>; mount it at "GET /static/". The dashboard does, and so
// do pages served elsewhere that use them (the fleet command's).
func Static() http.Handler {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // "static" is a fixed, valid path into the embedded tree
	}
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/static/")
		version, ok := assetVersion(name)
		if !ok { // no directory listings, nothing but the assets
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("ETag", `"`+version+`"`)
		if r.URL.Query().Get("v") == version {
			// Pages name an asset by the hash of its bytes (AssetURL):
			// under that name it never changes.
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

// assetVersion is the hash AssetURL puts in name's URL; false when name
// is not an embedded asset.
func assetVersion(name string) (string, bool) {
	v, ok := assetVersions()[name]
	return v, ok
}

// assetVersions hashes every embedded asset once.
var assetVersions = sync.OnceValue(func() map[string]string {
	entries, err := staticFS.ReadDir("static")
	if err != nil {
		panic(err) // "static" is a fixed, valid path into the embedded tree
	}
	versions := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		versions[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return versions
})

// AssetURL is where Static serves the embedded asset name:
// /static/<name>?v=<hash of its content>.
func AssetURL(name string) (string, error) {
	version, ok := assetVersion(name)
	if !ok {
		return "", fmt.Errorf("web: no asset %q", name)
	}
	return "/static/" + name + "?v=" + version, nil
}

// contentSecurityPolicy allows the page's own script, styles and RPCs and
// nothing else; no inline script or style is ever rendered.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// render writes a page with status, or a plain 500 when rendering fails
// (nothing is written before the page is complete).
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		if !errors.Is(err, context.Canceled) {
			h.o.Logger.Error("web: render failed", "path", r.URL.Path, "err", err)
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	PageHeaders(w.Header(), contentSecurityPolicy)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// PageHeaders sets what an HTML page is served with: never cached (it is
// live), never sniffed, referrers kept to this origin, and csp.
func PageHeaders(hd http.Header, csp string) {
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
}

// queryStatus is the HTTP status of a failed history query, with the
// message a page may show for it.
func (h *Handler) queryStatus(r *http.Request, err error) (int, string) {
	switch domain.ErrorCode(err) {
	case domain.CodeInvalidArgument:
		return http.StatusBadRequest, domain.ErrorMessage(err)
	case domain.CodeUnavailable:
		return http.StatusServiceUnavailable, "history store unavailable: " + domain.ErrorMessage(err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "the history query took too long; narrow the window"
	}
	if !errors.Is(err, context.Canceled) {
		h.o.Logger.Error("web: history query failed", "path", r.URL.Path, "err", err)
	}
	return http.StatusInternalServerError, "internal error"
}

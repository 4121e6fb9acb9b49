package views

// Page is what every page's frame needs.
type Page struct {
	// Title is the page's own title; the frame appends the product name.
	Title string
	// Active names the navigation entry of this page: "live", "history" or
	// "audit" (or one of Nav's keys).
	Active string
	// StyleHref and ScriptHref are the versioned asset URLs; ScriptHref is
	// empty on pages that need no JavaScript.
	StyleHref  string
	ScriptHref string
	// RefreshSeconds, when positive, adds a <meta http-equiv="refresh">
	// inside <noscript>: the page reloads itself only when JavaScript is
	// off.
	RefreshSeconds int
	// Notice is a page-wide message (history off, store unreachable, …).
	Notice string
	// Version is the build's one line, shown in the footer when set.
	Version string
	// Brand is the header's name, linking to /; empty is "loadreporter".
	Brand string
	// Nav is the header's navigation; nil is the worker's pages (Nav).
	Nav []NavItem
}

func (p Page) brand() string {
	if p.Brand == "" {
		return "loadreporter"
	}
	return p.Brand
}

func (p Page) nav() []NavItem {
	if p.Nav == nil {
		return Nav
	}
	return p.Nav
}

// NavItem is one link of the header.
type NavItem struct {
	Key, Label, Href string
}

// Nav is the header's navigation of a worker's pages, in order.
var Nav = []NavItem{
	{Key: "live", Label: "Live", Href: "/"},
	{Key: "history", Label: "History", Href: "/history"},
	{Key: "audit", Label: "Audit", Href: "/audit"},
}

// Worker is the identity of the engine worker, formatted.
type Worker struct {
	Addr  string
	Type  string
	Model string
	Zone  string
}

// LivePage is the live view.
type LivePage struct {
	Page
	// HasReport is false until the first report exists.
	HasReport bool
	// Status is the status name (HEALTHY, STALE, UNREACHABLE, or NO REPORT),
	// StatusClass its CSS modifier (healthy, stale, unreachable, none).
	Status      string
	StatusClass string
	// Age is how old the report is ("3 s ago"); ReportTime the UTC time;
	// ReportTimeISO the RFC 3339 form for <time datetime>; ReportUnixMs
	// lets the script keep Age current.
	Age           string
	ReportTime    string
	ReportTimeISO string
	ReportUnixMs  string
	// ServerTimeUnixMs is when the page was made, on the server's clock:
	// the script keeps ages ticking on it, so a browser whose clock is
	// off still shows them right.
	ServerTimeUnixMs string
	// SnapshotAge is how old the report's numbers are: its oldest rank's
	// snapshot (what a STALE status measures), "—" without ranks.
	// SnapshotLagMs is how much older than the report that snapshot is
	// (the age is the lag plus the report's age); SnapshotTitle says when
	// it was taken; SnapshotStale marks it as what made the report STALE.
	SnapshotAge   string
	SnapshotLagMs string
	SnapshotTitle string
	SnapshotStale bool
	Sequence      string
	SourceID      string
	// LastError is empty for HEALTHY reports.
	LastError        string
	Worker           Worker
	RoutersConnected string
	// Ranks has one card per rank; empty for UNREACHABLE reports.
	Ranks []RankCard
	// WatchIntervalMs is the report interval the script asks Watch for.
	WatchIntervalMs string
	// SparkWindowMs is the time the rank cards' sparklines span;
	// SparkStepMs the spacing of the server's points (RankCard.SparkPoints);
	// SparkRing the most points the script keeps per rank.
	SparkWindowMs string
	SparkStepMs   string
	SparkRing     string
}

// RankCard is one rank's live numbers, formatted.
type RankCard struct {
	// Rank is the dp_rank; empty only in the script's card template.
	Rank string
	// Age is how old the rank's snapshot is; LagMs how much older than
	// the report (the script adds the report's age); AgeTitle when it was
	// taken. AgeStale marks the oldest rank of a STALE report.
	Age      string
	LagMs    string
	AgeTitle string
	AgeStale bool
	// SparkKV and SparkWaiting are the sparklines' SVG paths (viewBox
	// 0 0 100 20) of the last minutes of KV usage and waiting requests;
	// SparkSpan says how long they span ("last 2 min"), SparkPeak labels
	// the waiting scale; SparkPoints are the points
	// drawn ("unixMs,usage,waiting" joined by spaces), which the script
	// continues from.
	SparkKV      string
	SparkWaiting string
	SparkSpan    string
	SparkPeak    string
	SparkPoints  string
	// Running is "running / max running" requests.
	Running string
	Waiting string
	// WaitingTokens is the waiting requests' uncached tokens.
	WaitingTokens string
	// KVUsage is token_usage as a percentage; KVBarWidth the bar's width
	// in 0..100; KVLevel the bar's colour class (low, mid, high).
	KVUsage    string
	KVBarWidth string
	KVLevel    string
	// KVTokens is "used / max total" tokens.
	KVTokens     string
	Throughput   string
	CacheHitRate string
	Utilization  string
}

// FieldErrors maps a form field's name to the message shown next to it.
type FieldErrors map[string]string

// Option is one <option> of a <select>.
type Option struct {
	Value, Label string
	Selected     bool
}

// WindowLink is one preset of the history window picker.
type WindowLink struct {
	Key, Label, Href string
	Active           bool
}

// HistoryPage is the history view.
type HistoryPage struct {
	Page
	Windows []WindowLink
	// Since, Until and Worker are the custom-window form's values.
	Since, Until, Worker string
	Errors               FieldErrors
	// WindowText describes the window shown ("… – … UTC, 15 min").
	WindowText string
	// HasWindow is false when the window could not be resolved (errors);
	// nothing but the form is shown then.
	HasWindow bool
	Usage     Chart
	Waiting   Chart
	// WaitingPanels, when set, draw Waiting as small multiples (one chart
	// per rank on a shared scale) instead of one chart; WaitingNote says
	// which ranks they leave out.
	WaitingPanels []Chart
	WaitingNote   string
	// Imbalance is the spread of KV usage across ranks over time, with
	// the threshold drawn; ImbalanceHref lists its spans over the
	// threshold on the audit page.
	Imbalance     Chart
	ImbalanceHref string
	Timeline      Timeline
	Outages       []OutageRow
	Reports       ReportsTable
}

// Chart is a server-rendered SVG line chart: one series per rank.
type Chart struct {
	// ID is the chart's data-testid, e.g. "chart-token-usage".
	ID    string
	Title string
	// Width and Height are the viewBox; the plot area is inside
	// [Left, Right] × [Top, Bottom].
	Width, Height            int
	Left, Right, Top, Bottom string
	// PlotWidth is Right − Left, PlotHeight Bottom − Top.
	PlotWidth, PlotHeight string
	Series                []Series
	XTicks, YTicks        []Tick
	// Bands are the outages, shaded behind the lines over the plot's
	// height (the status timeline's spans).
	Bands []Span
	// Threshold, when set, is a horizontal line; the plot above it is
	// shaded.
	Threshold *Threshold
	// Empty says there was nothing to draw in the window; EmptyText says
	// why when it is not that nothing was recorded.
	Empty     bool
	EmptyText string
	// Note is a remark under the chart (e.g. the data was truncated).
	Note string
}

// Series is one rank's line.
type Series struct {
	Rank  string
	Label string
	Color string
	// D is the SVG path data (several subpaths where recording stopped).
	D string
}

// Threshold is a horizontal line at Pos, labelled; Above is the height
// of the plot above it (from Top to Pos).
type Threshold struct {
	Pos, Label, Above string
}

// Tick is an axis tick at Pos (an x or y in viewBox units).
type Tick struct {
	Pos   string
	Label string
}

// Timeline is the status timeline: recorded spans and outages over the
// window, in the same horizontal scale as the charts.
type Timeline struct {
	Width, Height   int
	Left, PlotWidth string
	Recorded        []Span
	Outages         []Span
	XTicks          []Tick
}

// Span is a horizontal band [X, X+W] of a timeline.
type Span struct {
	X, W  string
	Class string
	// Title is the tooltip (start, duration, last error).
	Title string
}

// OutageRow is one outage, formatted.
type OutageRow struct {
	Worker    string
	Start     string
	End       string
	Duration  string
	Statuses  string
	Reports   string
	LastError string
	Class     string
}

// ReportsTable is a page of reports, newest first.
type ReportsTable struct {
	Rows []ReportRow
	// NextHref continues with older reports; empty when nothing follows.
	NextHref string
	// FirstHref goes back to the newest page; empty on the first page.
	FirstHref string
}

// ReportRow is one report, summarised.
type ReportRow struct {
	Time        string
	Worker      string
	Sequence    string
	Status      string
	StatusClass string
	Ranks       string
	AvgKVUsage  string
	Running     string
	Waiting     string
	LastError   string
}

// AuditPage is the audit view.
type AuditPage struct {
	Page
	Form AuditForm
	// Errors are shown next to their fields; GeneralError above the form.
	Errors       FieldErrors
	GeneralError string
	// Result is nil until a query ran successfully.
	Result *ResultTable
	// CSVHref downloads the same query as CSV; empty when no query ran.
	CSVHref string
	// Bars draws a rank-stats result; nil for the other queries.
	Bars *RankBars
}

// RankBars is rank-stats as a bar chart, one row per (worker, rank): KV
// usage (avg as a bar, p95 as a lighter bar behind it) and max waiting,
// in viewBox units.
type RankBars struct {
	Width, Height int
	// Top and Bottom bound the rows; LabelX is where labels end.
	Top, Bottom, LabelX string
	// KVLeft…KVRight is the KV panel (0 to 100 %), KVText where its
	// values are written; WaitLeft…WaitRight the waiting panel.
	KVLeft, KVRight, KVText string
	WaitLeft, WaitRight     string
	// WaitTextX is where the waiting values are written.
	WaitTextX          string
	KVTicks, WaitTicks []Tick
	Rows               []RankBarRow
	// Note says which rows are not drawn.
	Note string
}

// RankBarRow is one (worker, rank).
type RankBarRow struct {
	Rank, Worker, Label string
	// Y is the row's top, TextY its text's baseline.
	Y, TextY string
	// The p95 and avg bars' tops and heights, and widths from KVLeft;
	// Level colours the avg bar (low, mid, high).
	P95Y, P95H, AvgY, AvgH string
	AvgW, P95W, Level      string
	KVText                 string
	// WaitW is the waiting bar's width from WaitLeft.
	WaitW, WaitText string
}

// AuditForm is the audit form's values, as typed.
type AuditForm struct {
	Queries   []Option
	Statuses  []Option
	Since     string
	Until     string
	Last      string
	Worker    string
	Rank      string
	Threshold string
	Interval  string
	Limit     string
	// DefaultInterval is the gaps interval used when Interval is blank
	// (the history interval).
	DefaultInterval string
}

// ResultTable is a query's result: the same rows the CSV download holds,
// formatted for people.
type ResultTable struct {
	Query   string
	Columns []string
	Rows    [][]Cell
	// Summary says how many rows and over which window.
	Summary string
	// Truncated says the query's limit cut the result.
	Truncated bool
	// NextHref continues a paged query (reports); empty when nothing
	// follows.
	NextHref string
}

// Cell is one formatted table cell; Class styles it (status colours,
// numbers aligned right).
type Cell struct {
	Text  string
	Class string
}

// FleetPage is the fleet command's page: one row per worker as the
// fleet's router-side client sees it, and the fleet as a whole.
type FleetPage struct {
	Page
	// ServerTimeUnixMs is when the page was made, on the server's clock;
	// the script measures ages against it.
	ServerTimeUnixMs string
	Summary          FleetSummary
	Rows             []FleetRow
	// EmptyRow is rendered into the <template> the script clones for
	// workers added later, so the row's markup has one source.
	EmptyRow FleetRow
}

// FleetSummary is the fleet as a whole: how many workers are fresh, and
// the aggregate over their ranks.
type FleetSummary struct {
	// Fresh is "3 of 4 workers fresh".
	Fresh string
	Ranks string
	// Running is "running / max running" requests; Waiting the waiting
	// requests.
	Running string
	Waiting string
	// KVUsage is the mean token_usage; KVBarWidth its bar in 0..100,
	// KVLevel the bar's colour class; KVTokens "used / total" tokens.
	KVUsage    string
	KVBarWidth string
	KVLevel    string
	KVTokens   string
	Throughput string
	// Pending is the requests and tokens the fleet's router sent that no
	// report counts yet, over every worker.
	Pending string
}

// FleetRow is one worker, formatted; figures a report does not give are
// "—".
type FleetRow struct {
	// Target is the worker's reporter as dialed; Dashboard its own live
	// page.
	Target    string
	Dashboard string
	// State is fresh, stale, unreachable or disconnected; StateClass the
	// status pill's modifier (healthy, stale, unreachable, none).
	State      string
	StateClass string
	// Reason says why the worker is not fresh.
	Reason string
	// Age is how long ago its report arrived; ReceivedUnixMs lets the
	// script keep it current.
	Age            string
	ReceivedUnixMs string
	Sequence       string
	// EngineAddr, WorkerType, Model and Zone are the report's worker
	// metadata.
	EngineAddr string
	WorkerType string
	Model      string
	Zone       string
	Running    string
	Waiting    string
	// KVUsage is the mean over the ranks; KVBars one bar per rank.
	KVUsage    string
	KVBars     []KVBar
	Throughput string
	// Pending is the requests and tokens the fleet's router sent the
	// worker that its report does not count yet.
	Pending string
	// Sort holds the raw values the script sorts on, as data-sort-*
	// attributes.
	Sort FleetSort
}

// FleetSort is a row's sort keys: numbers written as the script parses
// them ("" sorts last).
type FleetSort struct {
	State, Age, Running, Waiting, KV, Throughput, Pending string
}

// KVBar is one rank's bar in a row's KV chart, in the chart's viewBox
// (KVChartWidth × KVChartHeight).
type KVBar struct {
	Rank       string
	X, Y, W, H string
	Level      string
	// Title is the bar's tooltip ("rank 3: 42.1 %").
	Title string
}

// The KV chart of a row: a fixed-size box every rank's bar fits in,
// however many ranks, so the row never wraps.
const (
	KVChartWidth  = 96
	KVChartHeight = 20
)

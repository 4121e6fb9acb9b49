// Live updates for the dashboard's live page (web/views/live.templ).
//
// The server renders the latest report; this script subscribes to
// loadreporter.v1.WatchService/Watch on the page's own origin and re-renders
// the status bar and the rank cards in place, finding every element by the
// same data-testid the server rendered. New rank cards are cloned from the
// server's <template id="rank-card-template">, so the markup has one source.
// When the stream ends or fails it reconnects with exponential backoff.
//
// Auth: the page cannot know --auth-token, so no credentials are sent; with
// a token set the RPC is refused and the page keeps its server-rendered
// report, with the indicator showing "reconnecting".
//
// Ages tick every second on the server's clock (the page says the server's
// time when it was made): the report's, its snapshot's (the oldest rank's,
// what a STALE status measures) and each rank's. Each rank card also draws
// a sparkline of its last minutes (spark.ts), continued from the points
// the server drew.
//
// Numbers are formatted like web/format.go; keep the two in step.

import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { WatchService, type WatchResponse } from "../gen/loadreporter/v1/watch_pb";
import {
  ReportStatus,
  type LoadReport,
  type RankLoad,
} from "../gen/sglang/router/loadmonitor/v1/load_monitor_pb";
import { byTestId, follow, setText, type IndicatorState } from "./dom";
import { barWidth, decimal, duration, percent, thousands, usageLevel, workerTypeName } from "./format";
import { parsePoints, Ring, sparkPaths, sparkSpan, spanText } from "./spark";

function ago(ms: number): string {
  if (ms < 1000) return "just now";
  if (ms < 60_000) return `${Math.floor(ms / 1000)} s ago`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ago`;
  if (ms < 48 * 3_600_000) return `${Math.floor(ms / 3_600_000)} h ago`;
  return `${thousands(Math.floor(ms / 86_400_000))} d ago`;
}

function pad(n: number): string {
  return n < 10 ? "0" + n : String(n);
}

function clock(ms: number): string {
  const d = new Date(ms);
  return (
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`
  );
}

function statusName(s: ReportStatus): [text: string, cls: string] {
  switch (s) {
    case ReportStatus.HEALTHY:
      return ["HEALTHY", "healthy"];
    case ReportStatus.STALE:
      return ["STALE", "stale"];
    case ReportStatus.UNREACHABLE:
      return ["UNREACHABLE", "unreachable"];
    default:
      return ["UNSPECIFIED", "none"];
  }
}

// snapshotTitle is web/live.go's: when a snapshot was taken and how far
// behind the report.
function snapshotTitle(reportMs: number, lagMs: number): string {
  return `snapshot taken ${clock(reportMs - lagMs)}, ${duration(lagMs)} before the report`;
}

class LivePage {
  private reportMs = 0;
  // serverMs − Date.now() when the page was made.
  private readonly clockOffset: number;
  private readonly windowMs: number;
  private readonly stepMs: number;
  private readonly ringSize: number;
  private readonly intervalMs: number;
  private readonly rings = new Map<string, Ring>();

  constructor(
    private readonly root: HTMLElement,
    private readonly template: HTMLTemplateElement | null,
    intervalMs: number,
  ) {
    const age = byTestId(root, "report-age");
    const ms = Number(age?.getAttribute("data-unix-ms"));
    if (Number.isFinite(ms) && ms > 0) this.reportMs = ms;
    const server = Number(root.getAttribute("data-server-time-unix-ms"));
    this.clockOffset = Number.isFinite(server) && server > 0 ? server - Date.now() : 0;
    this.intervalMs = intervalMs;
    this.windowMs = Number(root.getAttribute("data-spark-window-ms")) || 300_000;
    this.stepMs = Number(root.getAttribute("data-spark-step-ms")) || 10_000;
    this.ringSize = Number(root.getAttribute("data-spark-ring")) || 400;
    // The server's points, which the live ones continue.
    for (const card of Array.from(root.querySelectorAll<HTMLElement>("[data-rank]"))) {
      const spark = byTestId(card, "rank-spark");
      const rank = card.getAttribute("data-rank");
      if (!spark || rank === null) continue;
      const ring = this.ring(rank);
      for (const p of parsePoints(spark.getAttribute("data-points") ?? "", this.stepMs)) ring.push(p);
    }
  }

  private ring(rank: string): Ring {
    let r = this.rings.get(rank);
    if (!r) {
      r = new Ring(this.ringSize, this.windowMs);
      this.rings.set(rank, r);
    }
    return r;
  }

  // elapsed is the report's age on the server's clock (never negative).
  private elapsed(): number {
    return Math.max(0, Date.now() + this.clockOffset - this.reportMs);
  }

  indicator(state: IndicatorState): void {
    const el = byTestId(this.root, "live-indicator");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = state === "off" ? "not live" : state;
  }

  tickAge(): void {
    if (this.reportMs <= 0) return;
    const elapsed = this.elapsed();
    setText(this.root, "report-age", ago(elapsed));
    const snap = byTestId(this.root, "snapshot-age");
    const lag = snap?.getAttribute("data-lag-ms");
    if (snap && lag) setText(this.root, "snapshot-age", ago(Number(lag) + elapsed));
    for (const el of Array.from(this.root.querySelectorAll<HTMLElement>('[data-testid="rank-age"][data-lag-ms]'))) {
      const lag = el.getAttribute("data-lag-ms");
      if (!lag) continue;
      const text = ago(Number(lag) + elapsed);
      if (el.textContent !== text) el.textContent = text;
    }
  }

  render(res: WatchResponse): void {
    setText(this.root, "routers-connected", thousands(res.routersConnected));
    const r = res.report;
    if (!r) return;
    const ranks = r.status === ReportStatus.UNREACHABLE ? [] : r.ranks;
    this.renderStatus(r, ranks);
    this.renderCards(r, ranks);
    this.tickAge();
  }

  private renderStatus(r: LoadReport, ranks: RankLoad[]): void {
    const [text, cls] = statusName(r.status);
    const status = byTestId(this.root, "report-status");
    if (status) {
      status.textContent = text;
      status.setAttribute("data-status", cls);
      status.className = `status status-${cls}`;
    }
    this.reportMs = Number(r.reportTimeUnixMs);
    const age = byTestId(this.root, "report-age");
    if (age) {
      age.setAttribute("data-unix-ms", String(this.reportMs));
      age.setAttribute("datetime", new Date(this.reportMs).toISOString());
      age.setAttribute("title", clock(this.reportMs));
    }
    const snap = byTestId(this.root, "snapshot-age");
    if (snap) {
      const lag = oldestLag(this.reportMs, ranks);
      snap.setAttribute("data-lag-ms", ranks.length ? String(lag) : "");
      snap.setAttribute("title", ranks.length ? snapshotTitle(this.reportMs, lag) : "");
      snap.className = r.status === ReportStatus.STALE && ranks.length ? "snapshot-age stale" : "snapshot-age";
      if (!ranks.length) snap.textContent = "—";
    }
    setText(this.root, "report-sequence", r.sequenceId.toString());
    setText(this.root, "report-time", clock(this.reportMs));
    setText(this.root, "report-source", r.sourceInstanceId || "—");
    const err = byTestId(this.root, "report-error");
    if (err) {
      err.textContent = r.lastError ?? "";
      err.hidden = !r.lastError;
      err.setAttribute("data-status", cls);
    }
    const w = r.worker;
    if (w) {
      setText(this.root, "worker-addr", w.workerAddr || "—");
      setText(this.root, "worker-type", workerTypeName(w.workerType, "unspecified"));
      setText(this.root, "worker-model", w.model || "—");
      setText(this.root, "worker-zone", w.zone || "—");
    }
  }

  private renderCards(r: LoadReport, ranks: RankLoad[]): void {
    const box = byTestId(this.root, "rank-cards");
    if (!box) return;
    const stale = r.status === ReportStatus.STALE;
    const oldestSnapshot = oldestLag(this.reportMs, ranks);
    for (const rk of ranks) {
      this.ring(String(rk.dpRank)).push({
        t: this.reportMs,
        u: rk.tokenUsage,
        w: Number(rk.numWaitingReqs),
        d: this.intervalMs,
      });
    }
    // Rings of ranks gone for a whole window are dropped with their points.
    for (const [rank, ring] of this.rings) {
      ring.trim(this.reportMs);
      if (ring.newest() < this.reportMs - this.windowMs) this.rings.delete(rank);
    }
    let oldest = this.reportMs;
    for (const ring of this.rings.values()) {
      const first = ring.points()[0];
      if (first) oldest = Math.min(oldest, first.t);
    }
    const span = sparkSpan(oldest, this.reportMs, this.windowMs);
    const keep = new Set<string>();
    let prev: Element | null = null;
    for (const rk of ranks) {
      const id = String(rk.dpRank);
      keep.add(id);
      let card = byTestId(box, `rank-card-${id}`);
      if (!card) {
        card = this.newCard(id);
        if (!card) continue;
      }
      // Keep cards in rank order (the report's order).
      const want: Element | null = prev ? prev.nextElementSibling : box.firstElementChild;
      if (want !== card) box.insertBefore(card, want);
      fillCard(card, rk);
      const lag = rankLag(this.reportMs, rk);
      const age = byTestId(card, "rank-age");
      if (age) {
        age.setAttribute("data-lag-ms", String(lag));
        age.setAttribute("title", snapshotTitle(this.reportMs, lag));
        age.setAttribute("class", stale && lag === oldestSnapshot ? "rank-age stale" : "rank-age");
      }
      this.drawSpark(card, id, span);
      prev = card;
    }
    for (const card of Array.from(box.children)) {
      const rank = card.getAttribute("data-rank");
      if (rank === null || !keep.has(rank)) card.remove();
    }
    const empty = byTestId(this.root, "rank-cards-empty");
    if (empty) {
      empty.hidden = ranks.length > 0;
      empty.textContent = "No rank data in this report.";
    }
  }

  private drawSpark(card: ParentNode, rank: string, span: number): void {
    const ring = this.rings.get(rank);
    if (!ring) return;
    const { kv, waiting, peak } = sparkPaths(ring.points(), this.reportMs, span);
    setText(card, "rank-spark-span", spanText(span));
    byTestId(card, "rank-spark-kv")?.setAttribute("d", kv);
    byTestId(card, "rank-spark-waiting")?.setAttribute("d", waiting);
    setText(card, "rank-spark-peak", `peak ${thousands(peak)} waiting`);
  }

  private newCard(rank: string): HTMLElement | null {
    const first = this.template?.content.firstElementChild;
    if (!first) return null;
    const card = first.cloneNode(true) as HTMLElement;
    card.setAttribute("data-testid", `rank-card-${rank}`);
    card.setAttribute("data-rank", rank);
    setText(card, "rank-id", rank);
    return card;
  }
}

// rankLag is how much older rk's snapshot is than the report (ms, never
// negative), as web/live.go's snapshotLag.
function rankLag(reportMs: number, rk: RankLoad): number {
  return Math.max(0, reportMs - Number(rk.snapshotTimeUnixMs));
}

function oldestLag(reportMs: number, ranks: RankLoad[]): number {
  let lag = 0;
  for (const rk of ranks) lag = Math.max(lag, rankLag(reportMs, rk));
  return lag;
}

function fillCard(card: ParentNode, rk: RankLoad): void {
  setText(card, "rank-running", `${thousands(rk.numRunningReqs)} / ${thousands(rk.maxRunningRequests)}`);
  setText(card, "rank-waiting", thousands(rk.numWaitingReqs));
  setText(card, "rank-waiting-tokens", `${thousands(rk.numWaitingUncachedTokens)} uncached tokens`);
  setText(card, "rank-kv-usage", percent(rk.tokenUsage));
  setText(card, "rank-kv-tokens", `${thousands(rk.numUsedTokens)} / ${thousands(rk.maxTotalNumTokens)} tokens`);
  setText(card, "rank-throughput", `${decimal(rk.genThroughput)} tok/s`);
  setText(card, "rank-cache-hit-rate", percent(rk.cacheHitRate));
  setText(card, "rank-utilization", percent(rk.utilization));
  const bar = byTestId<SVGRectElement>(card, "rank-kv-bar");
  if (bar) {
    bar.setAttribute("width", barWidth(rk.tokenUsage));
    bar.setAttribute("class", `bar-fill level-${usageLevel(rk.tokenUsage)}`);
  }
}

async function run(root: HTMLElement): Promise<void> {
  const intervalMs = Number(root.getAttribute("data-watch-interval-ms")) || 1000;
  const page = new LivePage(root, document.getElementById("rank-card-template") as HTMLTemplateElement | null, intervalMs);
  // A stream that sends nothing for this long is taken as dead.
  const silenceMs = Math.max(3 * intervalMs, 10_000);
  const base = new URL(".", location.href).href.replace(/\/$/, "");
  const client = createClient(WatchService, createConnectTransport({ baseUrl: base, useBinaryFormat: true }));

  setInterval(() => page.tickAge(), 1000);
  await follow(
    "watch",
    (signal) => client.watch({ reportIntervalMs: BigInt(intervalMs) }, { signal }),
    (msg) => page.render(msg),
    (state) => page.indicator(state),
    silenceMs,
  );
}

const root = document.querySelector<HTMLElement>("[data-live-root]");
if (root) void run(root);

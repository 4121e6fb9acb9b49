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
// Numbers are formatted like web/format.go; keep the two in step.

import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { WatchService, type WatchResponse } from "../gen/loadreporter/v1/watch_pb";
import {
  ReportStatus,
  WorkerType,
  type LoadReport,
  type RankLoad,
} from "../gen/sglang/router/loadmonitor/v1/load_monitor_pb";
import { byTestId, follow, setText, type IndicatorState } from "./dom";
import { barWidth, decimal, percent, thousands, usageLevel } from "./format";

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

function workerTypeName(t: WorkerType): string {
  switch (t) {
    case WorkerType.REGULAR:
      return "regular";
    case WorkerType.PREFILL:
      return "prefill";
    case WorkerType.DECODE:
      return "decode";
    default:
      return "unspecified";
  }
}

class LivePage {
  private reportMs = 0;

  constructor(
    private readonly root: HTMLElement,
    private readonly template: HTMLTemplateElement | null,
  ) {
    const age = byTestId(root, "report-age");
    const ms = Number(age?.getAttribute("data-unix-ms"));
    if (Number.isFinite(ms) && ms > 0) this.reportMs = ms;
  }

  indicator(state: IndicatorState): void {
    const el = byTestId(this.root, "live-indicator");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = state === "off" ? "not live" : state;
  }

  tickAge(): void {
    if (this.reportMs > 0) setText(this.root, "report-age", ago(Date.now() - this.reportMs));
  }

  render(res: WatchResponse): void {
    setText(this.root, "routers-connected", thousands(res.routersConnected));
    const r = res.report;
    if (!r) return;
    this.renderStatus(r);
    this.renderCards(r.status === ReportStatus.UNREACHABLE ? [] : r.ranks);
  }

  private renderStatus(r: LoadReport): void {
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
    this.tickAge();
    setText(this.root, "report-sequence", r.sequenceId.toString());
    setText(this.root, "report-time", clock(this.reportMs));
    setText(this.root, "report-source", r.sourceInstanceId || "—");
    const err = byTestId(this.root, "report-error");
    if (err) {
      err.textContent = r.lastError ?? "";
      err.hidden = !r.lastError;
    }
    const w = r.worker;
    if (w) {
      setText(this.root, "worker-addr", w.workerAddr || "—");
      setText(this.root, "worker-type", workerTypeName(w.workerType));
      setText(this.root, "worker-model", w.model || "—");
      setText(this.root, "worker-zone", w.zone || "—");
    }
  }

  private renderCards(ranks: RankLoad[]): void {
    const box = byTestId(this.root, "rank-cards");
    if (!box) return;
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
  const page = new LivePage(root, document.getElementById("rank-card-template") as HTMLTemplateElement | null);
  const intervalMs = Number(root.getAttribute("data-watch-interval-ms")) || 1000;
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

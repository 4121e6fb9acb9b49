// Live updates for the fleet page (`loadreporter fleet`, rendered by
// cmd/loadreporter/fleet/page.go).
//
// The server renders every worker's row; this script follows
// loadreporter.v1.FleetService/WatchFleet on the page's own origin, a server
// stream that sends each worker's view when it changes, and updates the rows
// in place: the same <tr> per target for the page's whole life, its cells
// found by the data-testid the server rendered. Rows and rank bars that
// appear later are cloned from the server's <template>s, so the markup has
// one source. There is no polling: when the stream ends, fails or stays
// silent too long it reconnects with exponential backoff, and its first
// message brings every row up to date.
//
// Report ages tick every second on the server's clock (each message says
// the server's time), so a browser whose clock is off still shows them
// right.

import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  FleetService,
  FleetWorkerState,
  type FleetWorker,
  type WatchFleetResponse,
} from "../gen/loadreporter/v1/fleet_pb";
import { ReportStatus, type RankLoad } from "../gen/sglang/router/loadmonitor/v1/load_monitor_pb";
import { byTestId, follow, setText, type IndicatorState } from "./dom";

// The server sends at least every 10 s (an empty message when the fleet is
// quiet); three times that in silence means the connection is dead.
const silenceMs = 30_000;

// stateName is the state as client.State names it (the server renders the
// same names).
function stateName(s: FleetWorkerState): string {
  switch (s) {
    case FleetWorkerState.DISCONNECTED:
      return "disconnected";
    case FleetWorkerState.UNREACHABLE:
      return "unreachable";
    case FleetWorkerState.STALE:
      return "stale";
    case FleetWorkerState.FRESH:
      return "fresh";
    default:
      return "unspecified";
  }
}

// ageText is page.go's ageText.
function ageText(ms: number): string {
  if (ms < 1000) return `${Math.max(ms, 0)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

// kvPercent is page.go's rankOf: the KV usage clamped to [0, 100] %.
function kvPercent(f: number): number {
  return Number.isFinite(f) ? Math.min(Math.max(f * 100, 0), 100) : 0;
}

class FleetPage {
  // serverOffsetMs turns the browser's clock into the server's.
  private serverOffsetMs = 0;
  private readonly rows: HTMLElement;

  constructor(private readonly root: HTMLElement) {
    this.rows = byTestId(root, "workers") ?? root;
    const server = Number(root.getAttribute("data-server-time-unix-ms"));
    if (Number.isFinite(server) && server > 0) this.serverOffsetMs = Date.now() - server;
  }

  indicator(state: IndicatorState): void {
    const el = byTestId(this.root, "fleet-indicator");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = state === "off" ? "not live" : state;
  }

  render(msg: WatchFleetResponse): void {
    this.serverOffsetMs = Date.now() - Number(msg.serverTimeUnixMs);
    for (const w of msg.workers) this.fillRow(this.row(w.target), w);
    this.arrange(msg.targets);
    setText(this.root, "summary", `${msg.freshWorkers} of ${msg.targets.length} workers fresh`);
    this.tickAges();
  }

  tickAges(): void {
    const now = Date.now() - this.serverOffsetMs;
    for (const row of this.allRows()) {
      const age = byTestId(row, "age");
      const received = Number(age?.getAttribute("data-received-unix-ms"));
      if (age && received > 0) setText(row, "age", ageText(Math.round(now - received)));
    }
  }

  private allRows(): HTMLElement[] {
    return Array.from(this.rows.querySelectorAll<HTMLElement>('[data-testid="worker"]'));
  }

  // row is target's row, cloned from the template when it has none yet.
  private row(target: string): HTMLElement {
    const found = this.allRows().find((r) => r.getAttribute("data-target") === target);
    if (found) return found;
    const tmpl = document.getElementById("worker-row-template") as HTMLTemplateElement | null;
    const row = (tmpl?.content.firstElementChild?.cloneNode(true) as HTMLElement | undefined) ?? document.createElement("tr");
    row.setAttribute("data-target", target);
    this.rows.appendChild(row);
    return row;
  }

  // arrange puts the rows in the fleet's order and drops removed workers.
  private arrange(targets: string[]): void {
    const byTarget = new Map(this.allRows().map((r) => [r.getAttribute("data-target") ?? "", r]));
    let prev: Element | null = null;
    for (const t of targets) {
      const row = byTarget.get(t);
      if (!row) continue;
      byTarget.delete(t);
      const want: Element | null = prev ? prev.nextElementSibling : this.rows.firstElementChild;
      if (want !== row) this.rows.insertBefore(row, want);
      prev = row;
    }
    for (const gone of byTarget.values()) gone.remove();
  }

  private fillRow(row: HTMLElement, w: FleetWorker): void {
    const state = stateName(w.state);
    row.setAttribute("data-sequence", String(w.report?.sequenceId ?? 0n));
    const link = byTestId<HTMLAnchorElement>(row, "dashboard");
    if (link) {
      if (link.getAttribute("href") !== w.dashboardUrl) link.setAttribute("href", w.dashboardUrl);
      if (link.textContent !== w.target) link.textContent = w.target;
    }
    const st = byTestId(row, "state");
    if (st) {
      st.textContent = state;
      st.className = `state ${state}`;
    }
    const reason = byTestId(row, "reason");
    if (reason) {
      reason.textContent = w.reason;
      reason.hidden = w.reason === "";
    }
    const age = byTestId(row, "age");
    if (age) {
      const received = w.report ? Number(w.receivedUnixMs) : 0;
      age.setAttribute("data-received-unix-ms", String(received));
      if (!received) age.textContent = "-";
    }
    const ranks = w.report && w.report.status !== ReportStatus.UNREACHABLE ? w.report.ranks : [];
    this.fillRanks(byTestId(row, "ranks"), ranks);
  }

  // fillRanks updates the rank bars in place, adding and dropping bars as
  // the worker's rank set changes.
  private fillRanks(box: HTMLElement | null, ranks: RankLoad[]): void {
    if (!box) return;
    const have = Array.from(box.querySelectorAll<HTMLElement>('[data-testid="rank"]'));
    const tmpl = document.getElementById("rank-template") as HTMLTemplateElement | null;
    ranks.forEach((rk, i) => {
      let el = have[i];
      if (!el) {
        const clone = tmpl?.content.firstElementChild?.cloneNode(true) as HTMLElement | undefined;
        if (!clone) return;
        el = clone;
        box.appendChild(el);
      }
      const pct = kvPercent(rk.tokenUsage);
      el.setAttribute("data-rank", String(rk.dpRank));
      setText(el, "rank-id", String(rk.dpRank));
      setText(el, "rank-kv", `${pct.toFixed(1)}%`);
      const bar = byTestId(el, "rank-kv-bar");
      if (bar) bar.style.width = `${pct.toFixed(1)}%`;
    });
    for (const extra of have.slice(ranks.length)) extra.remove();
  }
}

async function run(root: HTMLElement): Promise<void> {
  const page = new FleetPage(root);
  const base = new URL(".", location.href).href.replace(/\/$/, "");
  const client = createClient(FleetService, createConnectTransport({ baseUrl: base, useBinaryFormat: true }));

  setInterval(() => page.tickAges(), 1000);
  await follow(
    "fleet stream",
    (signal) => client.watchFleet({}, { signal }),
    (msg) => page.render(msg),
    (state) => page.indicator(state),
    silenceMs,
  );
}

const root = document.querySelector<HTMLElement>("[data-fleet-root]");
if (root) void run(root);

// Live updates for the fleet page (`loadreporter fleet`: web/views/fleet.templ,
// its model made by cmd/loadreporter/fleet/page.go).
//
// The server renders the fleet's summary and every worker's row; this
// script follows loadreporter.v1.FleetService/WatchFleet on the page's own
// origin, a server stream that sends each worker's view when it changes
// (and the fleet's aggregate with every message), and updates the page in
// place: the same <tr> per target for the page's whole life, its cells
// found by the data-testid the server rendered. Rows and KV bars that
// appear later are cloned from the server's <template>s, so the markup has
// one source. There is no polling: when the stream ends, fails or stays
// silent too long it reconnects with exponential backoff, and its first
// message brings every row up to date.
//
// It also works what the server cannot: a filter (text, over the worker,
// its engine, model and zone, and a state), and sorting by any column (its
// header, clicked once ascending, twice descending). The table without the
// script shows every worker in the fleet's order.
//
// Every figure is written as page.go writes it (format.ts holds the shared
// number formats); report ages tick every second on the server's clock
// (each message says the server's time), so a browser whose clock is off
// still shows them right.

import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  FleetService,
  FleetWorkerState,
  type FleetAggregate,
  type FleetWorker,
  type WatchFleetResponse,
} from "../gen/loadreporter/v1/fleet_pb";
import { ReportStatus, WorkerType, type RankLoad } from "../gen/sglang/router/loadmonitor/v1/load_monitor_pb";
import { byTestId, follow, setText, type IndicatorState } from "./dom";
import { barWidth, percent, thousands, usageLevel, workerTypeName } from "./format";

// The server sends at least every 10 s (an empty message when the fleet is
// quiet); three times that in silence means the connection is dead.
const silenceMs = 30_000;

const dash = "—";

// The KV chart's viewBox: views.KVChartWidth × views.KVChartHeight.
const chartWidth = 96;
const chartHeight = 20;

const svgNS = "http://www.w3.org/2000/svg";

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

// stateClass, stateOrder, ageText, throughputText, pendingText and kvBar
// are page.go's (workerTypeName, in ./format, too).
function stateClass(state: string): string {
  if (state === "fresh") return "healthy";
  if (state === "stale" || state === "unreachable") return state;
  return "none";
}

function stateOrder(state: string): number {
  const i = ["fresh", "stale", "unreachable"].indexOf(state);
  return i >= 0 ? i : 3;
}

function ageText(ms: number): string {
  if (ms < 1000) return `${Math.max(ms, 0)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

function pendingText(requests: bigint, tokens: bigint): string {
  if (requests === 0n && tokens === 0n) return "0";
  return `${thousands(requests)} req · ${thousands(tokens)} tok`;
}

function throughputText(f: number): string {
  if (!Number.isFinite(f)) return dash;
  return `${thousands(Math.round(f))} tok/s`;
}

function clamp01(f: number): number {
  return f > 0 ? Math.min(f, 1) : 0;
}

function kvBar(i: number, n: number, usage: number): [x: string, y: string, w: string, h: string] {
  const slot = chartWidth / n;
  const gap = n <= 32 ? slot * 0.2 : 0;
  const height = clamp01(usage) * chartHeight;
  return [(i * slot + gap / 2).toFixed(2), (chartHeight - height).toFixed(2), (slot - gap).toFixed(2), height.toFixed(2)];
}

function orDash(s: string | undefined): string {
  return s ? s : dash;
}

// setAttr sets an attribute only when it changes.
function setAttr(el: Element | null, name: string, value: string): void {
  if (el && el.getAttribute(name) !== value) el.setAttribute(name, value);
}

// Columns sorted by text rather than by a number.
const textColumns: Record<string, (row: HTMLElement) => string> = {
  target: (row) => row.getAttribute("data-target") ?? "",
  model: (row) => byTestId(row, "model")?.textContent ?? "",
  zone: (row) => byTestId(row, "zone")?.textContent ?? "",
};

class FleetPage {
  // serverOffsetMs turns the browser's clock into the server's.
  private serverOffsetMs = 0;
  private readonly rows: HTMLElement;
  // targets is the fleet's order, as the last message gave it.
  private targets: string[] = [];
  private sortKey = "";
  private sortDir = 1;
  private filterText = "";
  private stateFilter = "";

  constructor(private readonly root: HTMLElement) {
    this.rows = byTestId(root, "workers") ?? root;
    const server = Number(root.getAttribute("data-server-time-unix-ms"));
    if (Number.isFinite(server) && server > 0) this.serverOffsetMs = Date.now() - server;
    this.targets = this.allRows().map((r) => r.getAttribute("data-target") ?? "");
    this.setupControls();
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
    this.targets = msg.targets;
    const wanted = new Set(msg.targets);
    for (const row of this.allRows()) if (!wanted.has(row.getAttribute("data-target") ?? "")) row.remove();
    setText(this.root, "summary", `${msg.freshWorkers} of ${msg.targets.length} workers fresh`);
    if (msg.aggregate) this.fillSummary(msg.aggregate);
    this.arrange();
    this.tickAges();
  }

  tickAges(): void {
    const now = Date.now() - this.serverOffsetMs;
    for (const row of this.allRows()) {
      const age = byTestId(row, "age");
      const received = Number(age?.getAttribute("data-received-unix-ms"));
      if (!age || !(received > 0)) continue;
      const ms = Math.round(now - received);
      setText(row, "age", ageText(ms));
      row.setAttribute("data-sort-age", String(ms));
    }
  }

  // setupControls shows the filter and turns each column header into a
  // sort button.
  private setupControls(): void {
    const controls = byTestId(this.root, "fleet-controls");
    if (controls) controls.hidden = false;
    const filter = byTestId<HTMLInputElement>(this.root, "fleet-filter");
    filter?.addEventListener("input", () => {
      this.filterText = filter.value.trim().toLowerCase();
      this.arrange();
    });
    const state = byTestId<HTMLSelectElement>(this.root, "fleet-state-filter");
    state?.addEventListener("change", () => {
      this.stateFilter = state.value;
      this.arrange();
    });
    for (const th of Array.from(this.root.querySelectorAll<HTMLElement>("th[data-sort]"))) {
      const key = th.getAttribute("data-sort") ?? "";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.setAttribute("data-testid", `sort-${key}`);
      button.textContent = th.textContent;
      th.replaceChildren(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", () => {
        this.sortDir = this.sortKey === key ? -this.sortDir : 1;
        this.sortKey = key;
        for (const other of Array.from(this.root.querySelectorAll("th[data-sort]"))) other.setAttribute("aria-sort", "none");
        th.setAttribute("aria-sort", this.sortDir > 0 ? "ascending" : "descending");
        this.arrange();
      });
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

  // arrange puts the rows in the order asked (the fleet's, or the sort
  // column's, ties in the fleet's) and hides those the filter leaves out.
  private arrange(): void {
    const order = new Map(this.targets.map((t, i) => [t, i]));
    const fleetOrder = (r: HTMLElement) => order.get(r.getAttribute("data-target") ?? "") ?? Number.MAX_SAFE_INTEGER;
    const rows = this.allRows();
    rows.sort((a, b) => this.compare(a, b) || fleetOrder(a) - fleetOrder(b));
    let prev: Element | null = null;
    let shown = 0;
    for (const row of rows) {
      const want: Element | null = prev ? prev.nextElementSibling : this.rows.firstElementChild;
      if (want !== row) this.rows.insertBefore(row, want);
      prev = row;
      row.hidden = !this.matches(row);
      if (!row.hidden) shown++;
    }
    const filtering = this.filterText !== "" || this.stateFilter !== "";
    setText(this.root, "fleet-shown", filtering ? `${shown} of ${rows.length} workers shown` : "");
    const none = byTestId(this.root, "fleet-none-shown");
    if (none) none.hidden = shown > 0 || rows.length === 0;
  }

  // compare orders two rows by the sort column; a row without the figure
  // ("—", or before its first report) goes last either way.
  private compare(a: HTMLElement, b: HTMLElement): number {
    if (!this.sortKey) return 0;
    const text = textColumns[this.sortKey];
    if (text) {
      const x = text(a);
      const y = text(b);
      if ((x === dash) !== (y === dash)) return x === dash ? 1 : -1;
      return this.sortDir * x.localeCompare(y);
    }
    const x = a.getAttribute(`data-sort-${this.sortKey}`) ?? "";
    const y = b.getAttribute(`data-sort-${this.sortKey}`) ?? "";
    if ((x === "") !== (y === "")) return x === "" ? 1 : -1;
    return this.sortDir * (Number(x) - Number(y));
  }

  private matches(row: HTMLElement): boolean {
    const state = byTestId(row, "state")?.textContent ?? "";
    if (this.stateFilter === "not-fresh" ? state === "fresh" : this.stateFilter !== "" && state !== this.stateFilter) return false;
    if (!this.filterText) return true;
    const haystack = [row.getAttribute("data-target"), ...["engine", "model", "zone"].map((id) => byTestId(row, id)?.textContent)]
      .join(" ")
      .toLowerCase();
    return haystack.includes(this.filterText);
  }

  private fillSummary(a: FleetAggregate): void {
    const n = a.dpRankCount;
    setText(this.root, "agg-ranks", thousands(n));
    setText(this.root, "agg-running", thousands(a.totalRunningReqs));
    setText(this.root, "agg-waiting", thousands(a.totalWaitingReqs));
    setText(this.root, "agg-kv", n > 0 ? percent(a.avgTokenUsage) : dash);
    const bar = byTestId(this.root, "agg-kv-bar");
    setAttr(bar, "width", n > 0 ? barWidth(a.avgTokenUsage) : "0");
    setAttr(bar, "class", `bar-fill level-${n > 0 ? usageLevel(a.avgTokenUsage) : "low"}`);
    const used = thousands(a.totalUsedTokens);
    setText(this.root, "agg-kv-tokens", a.totalTokens > 0n ? `${used} / ${thousands(a.totalTokens)} tokens` : `${used} tokens`);
    setText(this.root, "agg-throughput", n > 0 ? throughputText(a.avgThroughput * n) : dash);
    setText(this.root, "agg-pending", pendingText(a.pendingRequests, a.pendingTokens));
  }

  private fillRow(row: HTMLElement, w: FleetWorker): void {
    const state = stateName(w.state);
    const rep = w.report;
    setAttr(row, "data-sequence", String(rep?.sequenceId ?? 0n));
    setAttr(row, "class", `worker-row ${state}`);
    setAttr(row, "data-sort-state", String(stateOrder(state)));
    setAttr(row, "data-sort-pending", String(w.pendingRequests));
    const link = byTestId<HTMLAnchorElement>(row, "dashboard");
    setAttr(link, "href", w.dashboardUrl);
    if (link && link.textContent !== w.target) link.textContent = w.target;
    const st = byTestId(row, "state");
    if (st) {
      st.textContent = state;
      setAttr(st, "class", `status status-${stateClass(state)}`);
    }
    const reason = byTestId(row, "reason");
    if (reason) {
      reason.textContent = w.reason;
      reason.hidden = w.reason === "";
    }
    const age = byTestId(row, "age");
    const received = rep ? Number(w.receivedUnixMs) : 0;
    setAttr(age, "data-received-unix-ms", String(received));
    if (!received) {
      setText(row, "age", dash);
      row.setAttribute("data-sort-age", "");
    }
    const meta = rep?.worker;
    setText(row, "engine", rep ? orDash(meta?.workerAddr) : dash);
    setText(row, "worker-type", rep ? workerTypeName(meta?.workerType ?? WorkerType.UNSPECIFIED, "") : "");
    for (const [id, value] of [
      ["model", rep ? orDash(meta?.model) : dash],
      ["zone", rep ? orDash(meta?.zone) : dash],
    ]) {
      setText(row, id, value);
      setAttr(byTestId(row, id), "title", value);
    }
    setText(row, "pending", pendingText(w.pendingRequests, w.pendingTokens));
    const ranks = rep && rep.status !== ReportStatus.UNREACHABLE ? rep.ranks : [];
    this.fillFigures(row, ranks);
  }

  // fillFigures writes the sums over the ranks and one KV bar per rank,
  // updating the bars in place and adding or dropping bars as the rank
  // set changes.
  private fillFigures(row: HTMLElement, ranks: RankLoad[]): void {
    let running = 0n;
    let maxRunning = 0n;
    let waiting = 0n;
    let usage = 0;
    let throughput = 0;
    for (const k of ranks) {
      running += k.numRunningReqs;
      maxRunning += k.maxRunningRequests;
      waiting += k.numWaitingReqs;
      usage += k.tokenUsage;
      throughput += k.genThroughput;
    }
    const some = ranks.length > 0;
    usage = some ? usage / ranks.length : 0;
    setText(row, "running", some ? `${thousands(running)} / ${thousands(maxRunning)}` : dash);
    setText(row, "waiting", some ? thousands(waiting) : dash);
    setText(row, "kv", some ? percent(usage) : dash);
    setText(row, "throughput", some ? throughputText(throughput) : dash);
    setAttr(row, "data-sort-running", some ? String(running) : "");
    setAttr(row, "data-sort-waiting", some ? String(waiting) : "");
    setAttr(row, "data-sort-kv", some ? usage.toFixed(4) : "");
    setAttr(row, "data-sort-throughput", some ? throughput.toFixed(1) : "");

    const box = byTestId(row, "ranks");
    if (!box) return;
    const have = Array.from(box.querySelectorAll<SVGRectElement>('[data-testid="rank"]'));
    const tmpl = document.getElementById("kv-bar-template") as HTMLTemplateElement | null;
    ranks.forEach((k, i) => {
      let bar: Element | undefined = have[i];
      if (!bar) {
        bar = (tmpl?.content.querySelector("rect")?.cloneNode(true) as Element | undefined) ?? document.createElementNS(svgNS, "rect");
        box.appendChild(bar);
      }
      const [x, y, w, h] = kvBar(i, ranks.length, k.tokenUsage);
      setAttr(bar, "data-rank", String(k.dpRank));
      setAttr(bar, "x", x);
      setAttr(bar, "y", y);
      setAttr(bar, "width", w);
      setAttr(bar, "height", h);
      setAttr(bar, "class", `kv-bar level-${usageLevel(k.tokenUsage)}`);
      const title: Element = bar.querySelector("title") ?? bar.appendChild(document.createElementNS(svgNS, "title"));
      const text = `rank ${k.dpRank}: ${percent(k.tokenUsage)}`;
      if (title.textContent !== text) title.textContent = text;
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

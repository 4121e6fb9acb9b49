// The rank cards' sparklines: each rank's KV usage and waiting requests
// over the last minutes, drawn as web/spark.go draws them on the server
// (sparkPaths); keep the two in step.
//
// The server renders the first picture from the history store and writes
// the points it drew into the card (data-points); the script continues
// from them with every report Watch brings. Each rank keeps a Ring of at
// most `capacity` points: points closer together than window / capacity
// are merged, and points older than the window are dropped, so the cost
// of a card is bounded however fast reports come and however long the
// page stays open.

// A point: at t (unix ms), KV usage u and waiting requests w; d is the
// spacing it was sampled at (ms). A line joins two points no further
// apart than twice the larger of theirs.
export interface Point {
  t: number;
  u: number;
  w: number;
  d: number;
}

// The sparkline's viewBox: 100 × 20 (views.RankCard).
const W = 100;
const H = 20;

export class Ring {
  private pts: Point[] = [];

  constructor(
    private readonly capacity: number,
    private readonly windowMs: number,
  ) {}

  points(): readonly Point[] {
    return this.pts;
  }

  newest(): number {
    return this.pts.length ? this.pts[this.pts.length - 1].t : -Infinity;
  }

  // push adds p, the newest point: merged into the last one when closer
  // than the ring's resolution (the later usage, the larger queue), and
  // the points older than the window before it dropped.
  push(p: Point): void {
    const last = this.pts[this.pts.length - 1];
    if (last && p.t < last.t) return; // out of order: an older report
    const minGap = this.windowMs / this.capacity;
    if (last && p.t - last.t < minGap) {
      last.u = p.u;
      last.w = Math.max(last.w, p.w);
      last.t = p.t;
      last.d = Math.max(last.d, p.d);
    } else {
      this.pts.push({ ...p });
    }
    this.trim(p.t);
  }

  // trim drops the points older than the window ending at end, and the
  // oldest beyond the capacity.
  trim(end: number): void {
    let drop = 0;
    while (drop < this.pts.length && this.pts[drop].t < end - this.windowMs) drop++;
    drop = Math.max(drop, this.pts.length - this.capacity);
    if (drop > 0) this.pts.splice(0, drop);
  }
}

// parsePoints reads a card's data-points ("t,u,w" joined by spaces),
// each sampled every stepMs.
export function parsePoints(s: string, stepMs: number): Point[] {
  const out: Point[] = [];
  for (const part of s.split(" ")) {
    const [t, u, w] = part.split(",").map(Number);
    if (Number.isFinite(t) && Number.isFinite(u) && Number.isFinite(w)) out.push({ t, u, w, d: stepMs });
  }
  return out;
}

// sparkSpan is web/spark.go's: the shortest of the spans that holds the
// oldest point, at most windowMs.
export function sparkSpan(oldest: number, end: number, windowMs: number): number {
  for (const s of [30_000, 60_000, 120_000, 180_000]) {
    if (s < windowMs && end - oldest <= s) return s;
  }
  return windowMs;
}

// spanText is web/spark.go's: "last 30 s", "last 2 min".
export function spanText(span: number): string {
  return span < 60_000 ? `last ${Math.floor(span / 1000)} s` : `last ${Math.floor(span / 60_000)} min`;
}

function num(f: number): string {
  return f.toFixed(1);
}

// sparkPaths draws pts (in time order) over the span windowMs ending at
// end: the
// SVG paths of KV usage (0 to 1) and waiting (0 to peak), and peak, the
// largest waiting in the window (at least 1).
export function sparkPaths(
  pts: readonly Point[],
  end: number,
  windowMs: number,
): { kv: string; waiting: string; peak: number } {
  const start = end - windowMs;
  let peak = 1;
  for (const p of pts) if (p.t >= start && p.t <= end) peak = Math.max(peak, p.w);
  const x = (t: number) => ((t - start) / windowMs) * W;
  const yu = (u: number) => H - 1 - Math.max(0, Math.min(1, u)) * (H - 2);
  const yw = (w: number) => H - 1 - (w / peak) * (H - 2);
  let kv = "";
  let waiting = "";
  let prev: Point | null = null;
  let run = 0;
  for (const p of pts) {
    if (p.t < start || p.t > end) continue;
    if (prev && p.t - prev.t <= 2 * Math.max(p.d, prev.d)) {
      kv += " L";
      waiting += " L";
      run++;
    } else {
      if (run === 1) {
        kv += " h0";
        waiting += " h0";
      }
      if (kv.length > 0) {
        kv += " ";
        waiting += " ";
      }
      kv += "M";
      waiting += "M";
      run = 1;
    }
    kv += `${num(x(p.t))} ${num(yu(p.u))}`;
    waiting += `${num(x(p.t))} ${num(yw(p.w))}`;
    prev = p;
  }
  if (run === 1) {
    kv += " h0";
    waiting += " h0";
  }
  return { kv, waiting, peak };
}

// Numbers and worker types as the pages write them: web/humanize and
// web/live.go on the server (the live page), cmd/loadreporter/fleet/page.go
// (the fleet page). Keep them in step.

import { WorkerType } from "../gen/sglang/router/loadmonitor/v1/load_monitor_pb";

const intFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const oneDecimal = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

// thousands is humanize.Thousands: 262144 → "262,144".
export function thousands(n: bigint | number): string {
  return intFmt.format(n);
}

// percent is humanize.Percent: 0.4213 → "42.1 %".
export function percent(f: number): string {
  if (!Number.isFinite(f)) return "—";
  return (f * 100).toFixed(1) + " %";
}

// decimal is humanize.Decimal: 1234.56 → "1,234.6".
export function decimal(f: number): string {
  if (!Number.isFinite(f)) return "—";
  return oneDecimal.format(f);
}

// usageLevel colours a KV usage bar: comfortable, filling, or close to full.
export function usageLevel(f: number): string {
  if (f >= 0.9) return "high";
  if (f >= 0.7) return "mid";
  return "low";
}

// barWidth is a 0..1 fraction as a bar length in 0..100.
export function barWidth(f: number): string {
  if (!(f > 0)) return "0";
  return (Math.min(f, 1) * 100).toFixed(1);
}

// duration is humanize.Duration: below a minute, seconds to the
// millisecond ("12.034 s"); from a minute on, its two largest units
// ("5 min 3 s").
export function duration(ms: number): string {
  ms = Math.max(0, Math.floor(ms));
  if (ms < 60_000) return `${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, "0")} s`;
  const units: [number, string][] = [
    [86_400_000, "d"],
    [3_600_000, "h"],
    [60_000, "min"],
    [1000, "s"],
  ];
  let i = 0;
  while (ms < units[i][0]) i++;
  let s = `${thousands(Math.floor(ms / units[i][0]))} ${units[i][1]}`;
  const small = Math.floor((ms % units[i][0]) / units[i + 1][0]);
  if (small > 0) s += ` ${small} ${units[i + 1][1]}`;
  return s;
}

// workerTypeName is a worker type as the flags spell it (domain.WorkerType's
// String), and unspecified for none: the live page writes "unspecified",
// the fleet page (page.go's workerTypeName) nothing.
export function workerTypeName(t: WorkerType, unspecified: string): string {
  switch (t) {
    case WorkerType.REGULAR:
      return "regular";
    case WorkerType.PREFILL:
      return "prefill";
    case WorkerType.DECODE:
      return "decode";
    default:
      return unspecified;
  }
}

// Numbers as the pages write them: web/humanize and web/live.go on the
// server (the live page), cmd/loadreporter/fleet/page.go (the fleet page).
// Keep them in step.

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

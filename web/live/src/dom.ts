// What the live page (main.ts) and the fleet page (fleet.ts) share: finding
// elements by data-testid, and following a server stream for as long as the
// page is open.

import { ConnectError } from "@connectrpc/connect";

export function byTestId<T extends Element = HTMLElement>(root: ParentNode, id: string): T | null {
  return root.querySelector<T>(`[data-testid="${id}"]`);
}

export function setText(root: ParentNode, id: string, text: string): void {
  const el = byTestId(root, id);
  if (el && el.textContent !== text) el.textContent = text;
}

// sleep resolves after ms, or at once when signal aborts.
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export type IndicatorState = "off" | "connecting" | "live" | "reconnecting";

const minBackoffMs = 500;
const maxBackoffMs = 15_000;

// follow opens a stream with open and hands each message to onMessage until
// the page is left. A stream silent for silenceMs is taken as dead; a stream
// that ends or fails is opened again after a jittered exponential backoff.
// indicator says where it stands.
export async function follow<T>(
  what: string,
  open: (signal: AbortSignal) => AsyncIterable<T>,
  onMessage: (msg: T) => void,
  indicator: (state: IndicatorState) => void,
  silenceMs: number,
): Promise<void> {
  // Leaving the page ends the stream, so the server drops its session at
  // once; a page restored from the back/forward cache starts afresh.
  const leaving = new AbortController();
  addEventListener("pagehide", () => leaving.abort());
  addEventListener("pageshow", (e) => {
    if (e.persisted) location.reload();
  });
  let backoff = minBackoffMs;
  let first = true;
  while (!leaving.signal.aborted) {
    indicator(first ? "connecting" : "reconnecting");
    first = false;
    const call = new AbortController();
    const stop = () => call.abort();
    leaving.signal.addEventListener("abort", stop);
    let watchdog = setTimeout(stop, silenceMs);
    try {
      for await (const msg of open(call.signal)) {
        clearTimeout(watchdog);
        watchdog = setTimeout(stop, silenceMs);
        backoff = minBackoffMs;
        indicator("live");
        onMessage(msg);
      }
    } catch (e) {
      if (!leaving.signal.aborted) console.warn(`loadreporter: ${what} ended:`, ConnectError.from(e).message);
    } finally {
      clearTimeout(watchdog);
      leaving.signal.removeEventListener("abort", stop);
    }
    if (leaving.signal.aborted) break;
    indicator("reconnecting");
    await sleep(backoff * (0.75 + Math.random() / 2), leaving.signal);
    backoff = Math.min(backoff * 2, maxBackoffMs);
  }
}

// What the live page (main.ts) and the fleet page (fleet.ts) share: finding
// elements by data-testid, and waiting between reconnects.

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

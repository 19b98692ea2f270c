const warned = new Set<string>();

/**
 * A PyTorch warning, once per process per text: through process.emitWarning
 * where Node provides it (so --no-warnings and 'warning' listeners apply), else
 * console.warn. Python shows FutureWarning by default, once per call site.
 */
export function emitPyTorchWarning(message: string, category: 'FutureWarning' | 'UserWarning'): void {
  if (warned.has(message)) return;
  warned.add(message);
  const proc = (globalThis as { process?: { emitWarning?: (m: string, type: string) => void } }).process;
  if (typeof proc?.emitWarning === 'function') proc.emitWarning(message, category);
  else console.warn(`${category}: ${message}`);
}

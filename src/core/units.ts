import { MemscopeError } from './errors.js';

/** Display units, binary (1 KiB = 1024 B) as PyTorch's MemTracker uses. */
export type Unit = 'B' | 'KiB' | 'MiB' | 'GiB';

export const UNITS: readonly Unit[] = ['B', 'KiB', 'MiB', 'GiB'];

const DIVISOR: Record<Unit, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

export function parseUnit(unit: unknown, where = 'units'): Unit {
  if (typeof unit === 'string' && (UNITS as readonly string[]).includes(unit)) return unit as Unit;
  throw new MemscopeError(
    'bad-unit',
    `${where}: unknown unit ${JSON.stringify(unit)}; expected one of ${UNITS.join(', ')}`,
  );
}

/** Bytes in the given unit: integers for B, two decimals otherwise (like PyTorch's `_rounding_fn`). */
export function formatBytes(bytes: number, unit: Unit = 'B'): string {
  if (unit === 'B') return `${bytes} B`;
  return `${(bytes / DIVISOR[unit]).toFixed(2)} ${unit}`;
}

/** Bytes in the largest unit that keeps the value ≥ 1 (for summaries and tooltips). */
export function humanBytes(bytes: number): string {
  const abs = Math.abs(bytes);
  let unit: Unit = 'B';
  for (const u of UNITS) if (abs >= DIVISOR[u]) unit = u;
  return formatBytes(bytes, unit);
}

export function bytesIn(bytes: number, unit: Unit): number {
  return bytes / DIVISOR[unit];
}

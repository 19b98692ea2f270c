/**
 * How the report page embeds its data: ReportData as JSON, its long number columns packed
 * (`packReportData`), and read back in the page (`unpackReportData`). Framework-free.
 */
import type { ReportData } from './report-data.js';
import type { ReportHistoryDevice } from './snapshot-history-data.js';

/**
 * A number column as the page embeds it: zigzag varints (of the values, or of their differences
 * when that is shorter) in base64. Event times, allocation ids and addresses are integers that
 * mostly differ little from their neighbours, so a column takes a third to a half of its JSON
 * text, and the page's HTML parser (which reads every byte before any script runs) finishes
 * sooner.
 */
export interface PackedColumn {
  readonly $col: 'z' | 'zd';
  readonly n: number;
  readonly b64: string;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Integers up to this size zigzag exactly in a double. */
const PACKABLE = 2 ** 52;

function zigzag(v: number): number {
  return v >= 0 ? v * 2 : -v * 2 - 1;
}

function varintLength(z: number): number {
  let len = 1;
  while (z >= 128) {
    z = Math.floor(z / 128);
    len++;
  }
  return len;
}

function base64(bytes: Uint8Array, length: number): string {
  const parts: string[] = [];
  let chunk = '';
  for (let i = 0; i < length; i += 3) {
    const a = bytes[i];
    const b = i + 1 < length ? bytes[i + 1] : 0;
    const c = i + 2 < length ? bytes[i + 2] : 0;
    chunk += B64[a >> 2] + B64[((a & 3) << 4) | (b >> 4)] + (i + 1 < length ? B64[((b & 15) << 2) | (c >> 6)] : '=') + (i + 2 < length ? B64[c & 63] : '=');
    if (chunk.length >= 8192) {
      parts.push(chunk);
      chunk = '';
    }
  }
  parts.push(chunk);
  return parts.join('');
}

/** The column packed, or the column itself when a value is not an integer a double zigzags exactly. */
export function packColumn(values: readonly number[]): PackedColumn | readonly number[] {
  const n = values.length;
  let plain = 0;
  let delta = 0;
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (!Number.isInteger(v) || Math.abs(v) >= PACKABLE / 2) return values;
    plain += varintLength(zigzag(v));
    delta += varintLength(zigzag(v - prev));
    prev = v;
  }
  const useDelta = delta < plain;
  const bytes = new Uint8Array(useDelta ? delta : plain);
  let k = 0;
  prev = 0;
  for (let i = 0; i < n; i++) {
    let z = zigzag(useDelta ? values[i] - prev : values[i]);
    prev = values[i];
    while (z >= 128) {
      bytes[k++] = (z % 128) | 128;
      z = Math.floor(z / 128);
    }
    bytes[k++] = z;
  }
  return { $col: useDelta ? 'zd' : 'z', n, b64: base64(bytes, k) };
}

const B64_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) B64_VALUE[B64.charCodeAt(i)] = i;

/** The bytes a base64 string holds, as a binary string (the platform's decoder is native code). */
function unbase64(s: string, what: string): string {
  try {
    return atob(s);
  } catch {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c !== 61 && (c >= 128 || B64_VALUE[c] < 0)) throw new Error(`the embedded report data is damaged: ${what} has a character outside base64 at ${i}`);
    }
    throw new Error(`the embedded report data is damaged: ${what} is not base64`);
  }
}

/** The numbers of a packed column (a plain array is returned as it is). */
export function unpackColumn(col: PackedColumn | readonly number[], what: string): number[] {
  if (Array.isArray(col)) return col as number[];
  const c = col as PackedColumn;
  if (!c || (c.$col !== 'z' && c.$col !== 'zd') || typeof c.b64 !== 'string' || !(c.n >= 0)) throw new Error(`the embedded report data is damaged: ${what} is not a column`);
  const bytes = unbase64(c.b64, what);
  // Filled first: a packed array of the final length, never regrown.
  const out: number[] = new Array<number>(c.n).fill(0);
  const delta = c.$col === 'zd';
  let k = 0;
  let prev = 0;
  let i = 0;
  const end = bytes.length;
  while (i < end) {
    let b = bytes.charCodeAt(i++);
    let z = b & 127;
    // Up to four bytes (28 bits) in integer arithmetic; longer ones (addresses) in doubles.
    let shift = 7;
    while (b & 128 && i < end && shift < 28) {
      b = bytes.charCodeAt(i++);
      z |= (b & 127) << shift;
      shift += 7;
    }
    if (b & 128) {
      let mult = 2 ** 28;
      while (b & 128 && i < end) {
        b = bytes.charCodeAt(i++);
        z += (b & 127) * mult;
        mult *= 128;
      }
    }
    let v = z < 2 ** 30 ? ((z & 1) === 0 ? z >>> 1 : -((z + 1) >>> 1)) : z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    if (delta) v += prev;
    prev = v;
    if (k < c.n) out[k] = v;
    k++;
  }
  if (k !== c.n) throw new Error(`the embedded report data is damaged: ${what} holds ${k} values, not ${c.n}`);
  return out;
}

type Packed<T> = { [K in keyof T]: T[K] extends number[] ? PackedColumn | number[] : T[K] };

/** The report data with its long number columns packed, for embedding in the page. */
export function packReportData(data: ReportData): unknown {
  const pack = <T extends object>(o: T): Packed<T> => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) out[k] = Array.isArray(v) && v.length >= 64 && typeof v[0] === 'number' ? packColumn(v as number[]) : v;
    return out as Packed<T>;
  };
  // A history device holds its columns one level down (blocks, events, ooms) and two at the top.
  const packHistory = (d: ReportHistoryDevice): unknown => ({ ...pack(d), blocks: pack(d.blocks), events: pack(d.events), ooms: pack(d.ooms) });
  return {
    ...data,
    timeline: pack(data.timeline),
    memory: data.memory ? { ...data.memory, devices: data.memory.devices.map(pack), stackFolded: packColumn(data.memory.stackFolded) } : null,
    ...(data.history ? { history: { ...data.history, devices: data.history.devices.map(packHistory) } } : {}),
  };
}

/** The report data from the page's embedded JSON: packed columns back to numbers. */
export function unpackReportData(raw: unknown): ReportData {
  const data = raw as ReportData;
  const unpack = <T extends object>(o: T, what: string): T => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) out[k] = v && typeof v === 'object' && '$col' in v ? unpackColumn(v as PackedColumn, `${what}.${k}`) : v;
    return out as T;
  };
  const unpackHistory = (d: ReportHistoryDevice, what: string): ReportHistoryDevice => ({
    ...unpack(d, what),
    blocks: unpack(d.blocks, `${what}.blocks`),
    events: unpack(d.events, `${what}.events`),
    ooms: unpack(d.ooms, `${what}.ooms`),
  });
  return {
    ...data,
    timeline: unpack(data.timeline, 'timeline'),
    ...(data.history ? { history: { ...data.history, devices: data.history.devices.map((d, i) => unpackHistory(d, `history.devices[${i}]`)) } } : {}),
    memory: data.memory
      ? { ...data.memory, devices: data.memory.devices.map((d, i) => unpack(d, `memory.devices[${i}]`)), stackFolded: unpackColumn(data.memory.stackFolded as unknown as PackedColumn, 'memory.stackFolded') }
      : null,
  };
}

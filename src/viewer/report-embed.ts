/**
 * How a report page embeds its ReportData, and how the page reads it back. Framework-free: the
 * writer runs in Node (`memscope report`) and in browsers (src/browser/report-page.ts), the reader
 * in the page and in tests.
 *
 * The HTML parser reads every embedded byte before any script runs, and JSON.parse reads every
 * number as text, so the bulk of the data — its long number columns — travels as bytes:
 *
 * - Every array of at least 64 numbers anywhere in the data is a column. Integers that a double
 *   holds exactly are zigzag varints of the values or of their differences, whichever is shorter
 *   (event times, addresses and ids mostly differ little from their neighbours); a column with a
 *   fraction is little-endian float64. In the JSON the column is replaced by
 *   `{"$col": "z" | "zd" | "f64", "n": values, "at": offset, "len": bytes}`.
 * - The columns' bytes follow one another in one buffer, deflated (`deflate-raw`, which every
 *   browser inflates natively with `DecompressionStream`) where the writer has a deflater, and
 *   carried as base64 in the JSON: `"$columns": {"encoding", "bytes", "b64"}`.
 * - When the rest of the JSON (strings, stacks, segments) is itself large, it goes into the same
 *   buffer, first, and the page's JSON is only `{"$packed": {"encoding", "head", "bytes", "b64", "rest"}}`
 *   (`head`: the JSON's length in UTF-8 bytes at the buffer's start; offsets count from its end).
 *   There, each part whose JSON is long (the state history's segments, the flame graphs) is its
 *   own JSON text in the buffer, `{"$json": {"at", "len"}}` in its place. A small report's JSON
 *   stays readable as it is.
 *
 * The page reads lazily: a column is decoded, and a `$json` part parsed, when the app first reads
 * it, so a section never opened costs nothing.
 *
 * A packed page is two buffers, deflated apart, so the first frame waits for neither the HTML
 * parser nor the inflater to pass the rest: `$packed` itself holds the JSON head and the columns the
 * chart's first frame reads (`firstFrameColumn`), and `$packed.rest` every other column and `$json`
 * part. Places count from the head's end through the first buffer and on into the rest, as if the
 * two were one. The page's HTML carries the rest's base64 after the app's script (html.ts), and
 * the page reads it once the chart has drawn (`readEmbeddedReportInStages`' `restBase64`).
 */
import { MemscopeError } from '../core/errors.js';
import type { ReportData } from './report-data.js';
import { InflateError, inflateRaw } from './inflate.js';

/** Columns shorter than this stay JSON: the reference would be as long. */
const MIN_COLUMN = 64;
/** A JSON head longer than this (UTF-16 units) is deflated with the columns. */
const HEAD_INLINE_MAX = 256 * 1024;
/** In a packed page, a top-level part whose JSON is longer than this waits in the buffer until read. */
const LAZY_PART = 64 * 1024;
/** Integers up to this size zigzag exactly in a double. */
const PACKABLE = 2 ** 52;

/** Deflate and base64 as the writer's platform offers them. */
export interface EmbedCodec {
  /** Raw deflate (RFC 1951); absent where the platform has no synchronous deflater. */
  readonly deflateRaw?: (bytes: Uint8Array) => Uint8Array;
  readonly base64: (bytes: Uint8Array) => string;
}

/** A column's place in the buffer. */
interface ColumnRef {
  readonly $col: 'z' | 'zd' | 'f64';
  readonly n: number;
  at: number;
  readonly len: number;
}

/**
 * The columns the first frame of a report's chart reads: a snapshot's Active Memory Timeline
 * (events, allocations, their sites, the reserved line), and the category timeline of a capture or
 * a profiler trace with the allocations its hover lists (a snapshot's report has none there).
 * `path` is the column's place in ReportData, array indexes as numbers.
 */
function firstFrameColumn(path: string): boolean {
  return /^memory\.devices\.\d+\.(eventDt|start|end|bytes|site|reservedAt|reservedDelta)$/.test(path) || path.startsWith('timeline.') || path.startsWith('allocations.');
}

/**
 * Where the columns go while a report is embedded: the first frame's stretch, and the rest, placed
 * after it. Columns come first (`column`), then `$json` parts (`text`), which may hold column
 * references: `endColumns` moves the rest's columns past the first stretch before any part is
 * written, so every place is final when its part's JSON is.
 */
class ColumnSinks {
  readonly first = new ByteSink();
  readonly rest = new ByteSink();
  /** Columns written into `rest` while the first stretch may still grow. */
  private restColumns: ColumnRef[] | null = [];

  column(values: readonly number[], path: string): ColumnRef {
    if (!this.restColumns) throw new Error('a column after endColumns()');
    if (firstFrameColumn(path)) return writeColumn(values, this.first);
    const ref = writeColumn(values, this.rest);
    this.restColumns.push(ref);
    return ref;
  }

  endColumns(): void {
    if (!this.restColumns) return;
    for (const ref of this.restColumns) ref.at += this.first.length;
    this.restColumns = null;
  }

  text(text: string): { at: number; len: number } {
    this.endColumns();
    const place = writeText(text, this.rest);
    return { at: place.at + this.first.length, len: place.len };
  }

  /** Both stretches as one buffer, the first before the rest, every place counted from its start. */
  joined(): Uint8Array {
    this.endColumns();
    const all = new Uint8Array(this.first.length + this.rest.length);
    all.set(this.first.bytes.subarray(0, this.first.length));
    all.set(this.rest.bytes.subarray(0, this.rest.length), this.first.length);
    return all;
  }
}

/** The buffer as the JSON carries it. */
interface EmbeddedBytes {
  readonly encoding: 'deflate-raw' | 'none';
  /** Length of the buffer before deflating. */
  readonly bytes: number;
  readonly b64: string;
}

/** A packed page's buffers: the head and the first frame's columns, and the rest (`b64` left out where the page carries it apart, html.ts). */
interface PackedBytes extends EmbeddedBytes {
  /** Length of the JSON head at the buffer's start, in UTF-8 bytes. */
  readonly head: number;
  rest?: Omit<EmbeddedBytes, 'b64'> & { b64?: string };
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Base64 in plain code, for platforms without a native encoder at hand. */
export function base64(bytes: Uint8Array): string {
  const parts: string[] = [];
  const n = bytes.length;
  for (let start = 0; start < n; start += 24576) {
    const end = Math.min(n, start + 24576);
    let chunk = '';
    for (let i = start; i < end; i += 3) {
      const a = bytes[i]!;
      const b = i + 1 < n ? bytes[i + 1]! : 0;
      const c = i + 2 < n ? bytes[i + 2]! : 0;
      chunk += B64[a >> 2]! + B64[((a & 3) << 4) | (b >> 4)]! + (i + 1 < n ? B64[((b & 15) << 2) | (c >> 6)]! : '=') + (i + 2 < n ? B64[c & 63]! : '=');
    }
    parts.push(chunk);
  }
  return parts.join('');
}

/** A growable byte buffer. */
class ByteSink {
  bytes = new Uint8Array(1 << 16);
  length = 0;
  reserve(extra: number): void {
    if (this.length + extra <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.length + extra) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.bytes.subarray(0, this.length));
    this.bytes = next;
  }
}

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

/** Appends `values` to `sink` in the shortest of the three encodings; returns its reference. */
function writeColumn(values: readonly number[], sink: ByteSink): ColumnRef {
  const n = values.length;
  let plain = 0;
  let delta = 0;
  let prev = 0;
  let integers = true;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    if (!Number.isInteger(v) || Math.abs(v) >= PACKABLE / 2) {
      integers = false;
      break;
    }
    plain += varintLength(zigzag(v));
    delta += varintLength(zigzag(v - prev));
    prev = v;
  }
  const at = sink.length;
  if (!integers) {
    sink.reserve(n * 8);
    const view = new DataView(sink.bytes.buffer, sink.bytes.byteOffset + at, n * 8);
    for (let i = 0; i < n; i++) view.setFloat64(i * 8, values[i]!, true);
    sink.length += n * 8;
    return { $col: 'f64', n, at, len: n * 8 };
  }
  const useDelta = delta < plain;
  const len = useDelta ? delta : plain;
  sink.reserve(len);
  const out = sink.bytes;
  let k = at;
  prev = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    let z = zigzag(useDelta ? v - prev : v);
    prev = v;
    while (z >= 128) {
      out[k++] = (z % 128) | 128;
      z = Math.floor(z / 128);
    }
    out[k++] = z;
  }
  sink.length = k;
  return { $col: useDelta ? 'zd' : 'z', n, at, len };
}

function isColumn(v: unknown): v is number[] {
  return Array.isArray(v) && v.length >= MIN_COLUMN && typeof v[0] === 'number' && v.every((x) => typeof x === 'number');
}

/** `value` (at `path` in the report) with every column moved into `sinks` and replaced by its reference. */
function extractColumns(value: unknown, path: string, sinks: ColumnSinks): unknown {
  if (isColumn(value)) return sinks.column(value, path);
  if (Array.isArray(value)) return value.map((v, i) => extractColumns(v, `${path}.${i}`, sinks));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = extractColumns(v, path ? `${path}.${k}` : k, sinks);
    return out;
  }
  return value;
}

function carry(bytes: Uint8Array, codec: EmbedCodec): EmbeddedBytes {
  const deflated = codec.deflateRaw?.(bytes);
  return deflated ? { encoding: 'deflate-raw', bytes: bytes.length, b64: codec.base64(deflated) } : { encoding: 'none', bytes: bytes.length, b64: codec.base64(bytes) };
}

/** Appends UTF-8 `text` to `sink`; returns where it is. */
function writeText(text: string, sink: ByteSink): { at: number; len: number } {
  const bytes = new TextEncoder().encode(text);
  const at = sink.length;
  sink.reserve(bytes.length);
  sink.bytes.set(bytes, at);
  sink.length += bytes.length;
  return { at, len: bytes.length };
}

/**
 * `value` with each property whose JSON is longer than LAZY_PART (after its own long properties
 * are deferred) moved into `sink` as JSON text, `{"$json": {"at", "len"}}` in its place: the
 * state history's segments wait there, while its event columns, which the first frame reads
 * through the device, stay at hand.
 */
function deferParts(value: unknown, sinks: ColumnSinks): unknown {
  if (Array.isArray(value)) return typeof value[0] === 'object' ? value.map((v) => deferParts(v, sinks)) : value;
  if (!value || typeof value !== 'object' || '$col' in value) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const deferred = deferParts(v, sinks);
    const text = deferred && typeof deferred === 'object' ? JSON.stringify(deferred) : '';
    out[k] = text.length > LAZY_PART ? { $json: sinks.text(text) } : deferred;
  }
  return out;
}

/** The JSON value a report page embeds for `data` (see the header for its layout). */
export function embedReportData(data: ReportData, codec: EmbedCodec = { base64 }): unknown {
  const sinks = new ColumnSinks();
  const parts = Object.entries(data).map(([key, value]) => {
    const part = extractColumns(value, key, sinks);
    return { key, part, text: JSON.stringify(part) ?? '' };
  });
  const headLength = parts.reduce((n, p) => n + p.key.length + p.text.length + 4, 2);
  if (headLength <= HEAD_INLINE_MAX) {
    const head = Object.fromEntries(parts.map((p) => [p.key, p.part]));
    const columns = sinks.joined();
    return columns.length ? { ...head, $columns: carry(columns, codec) } : head;
  }
  // Large parts are JSON in the buffer, parsed when the page first reads them.
  sinks.endColumns();
  const head = deferParts(Object.fromEntries(parts.map((p) => [p.key, p.part])), sinks);
  const headBytes = new TextEncoder().encode(JSON.stringify(head));
  const first = new Uint8Array(headBytes.length + sinks.first.length);
  first.set(headBytes);
  first.set(sinks.first.bytes.subarray(0, sinks.first.length), headBytes.length);
  const packed: PackedBytes = { ...carry(first, codec), head: headBytes.length };
  if (sinks.rest.length) packed.rest = carry(sinks.rest.bytes.subarray(0, sinks.rest.length), codec);
  return { $packed: packed };
}

/** A report page whose embedded data cannot be read: the page shows this line instead of drawing. */
function damaged(what: string): MemscopeError {
  return new MemscopeError('damaged-report', `the embedded report data is damaged: ${what}`);
}

/** The bytes of a base64 string. */
function unbase64(s: string, what: string): Uint8Array<ArrayBuffer> {
  let text: string;
  try {
    text = atob(s);
  } catch {
    throw damaged(`${what} is not base64`);
  }
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

/**
 * The buffer the JSON carries, inflated where it was deflated: at once in plain code (inflate.ts)
 * when the page waits on it, else by the platform's DecompressionStream, which keeps the page
 * responsive while a large buffer inflates.
 */
function readBytes(e: EmbeddedBytes, what: string, now: true): Uint8Array;
function readBytes(e: EmbeddedBytes, what: string, now: false): Promise<Uint8Array>;
function readBytes(e: EmbeddedBytes, what: string, now: boolean): Uint8Array | Promise<Uint8Array> {
  if (!e || typeof e.b64 !== 'string' || (e.encoding !== 'deflate-raw' && e.encoding !== 'none')) throw damaged(`${what} is not an embedded buffer`);
  const raw = unbase64(e.b64, what);
  if (e.encoding === 'deflate-raw') {
    if (!(e.bytes >= 0)) throw damaged(`${what} does not say its length`);
    if (!now) return inflate(raw, e.bytes, what);
    try {
      return inflateRaw(raw, e.bytes);
    } catch (err) {
      if (!(err instanceof InflateError)) throw err;
      throw damaged(err.message.startsWith('it holds') ? `${what} ${err.message.slice(3)}` : `${what} does not inflate (${err.message})`);
    }
  }
  if (raw.length !== e.bytes) throw damaged(`${what} holds ${raw.length} bytes, not ${e.bytes}`);
  return raw;
}

/**
 * Raw-inflates `raw` into `size` bytes with the platform's DecompressionStream, reading its chunks
 * by hand (in Chromium that takes a third of the time `new Response(stream).arrayBuffer()` takes).
 */
async function inflate(raw: Uint8Array<ArrayBuffer>, size: number, what: string): Promise<Uint8Array> {
  let out: Uint8Array;
  try {
    out = new Uint8Array(size);
  } catch {
    throw damaged(`${what} says it holds ${size} bytes`);
  }
  let length = 0;
  const reader = new Blob([raw]).stream().pipeThrough(new DecompressionStream('deflate-raw')).getReader();
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch {
      throw damaged(`${what} does not inflate`);
    }
    if (chunk.done) break;
    const value = chunk.value;
    if (length + value.length > size) throw damaged(`${what} holds more than ${size} bytes`);
    out.set(value, length);
    length += value.length;
  }
  if (length !== size) throw damaged(`${what} holds ${length} bytes, not ${size}`);
  return out;
}

/**
 * The places of an embedded page's columns and parts: the first buffer, then the rest (a packed
 * page's second buffer, in once `complete` settles), counted as one.
 */
class Places {
  /** Every place's end is at most this (the rest counted once it is in or declared). */
  readonly length: number;
  constructor(
    private readonly first: Uint8Array,
    /** The rest, or null while it is being read. */
    private readonly rest: () => Uint8Array | null,
    restLength: number,
  ) {
    this.length = first.length + restLength;
  }

  /** The bytes of [at, at + len), which the caller checked lie inside `length`. */
  bytes(at: number, len: number, path: string): Uint8Array {
    const split = this.first.length;
    if (at + len <= split) return this.first.subarray(at, at + len);
    if (at < split) throw damaged(`${path} spans the page's two buffers`);
    const rest = this.rest();
    // The app reads only the first frame's columns before `complete`.
    if (!rest) throw new MemscopeError('report-not-ready', `the report's ${path} was read before the page finished reading it`);
    return rest.subarray(at - split, at - split + len);
  }
}

/** Refuses a reference that is not a column or reaches outside the buffer (checked when the page opens). */
function checkColumn(ref: ColumnRef, places: Places, what: string): void {
  const { n, at, len } = ref;
  if (ref.$col !== 'z' && ref.$col !== 'zd' && ref.$col !== 'f64') throw damaged(`${what} is not a column`);
  if (!(n >= 0) || !(at >= 0) || !(len >= 0) || at + len > places.length) throw damaged(`${what} points outside the embedded columns`);
  if (ref.$col === 'f64' && len !== n * 8) throw damaged(`${what} holds ${len / 8} values, not ${n}`);
  // A varint takes a byte at least: a count beyond that is damage, found before anything is made that long.
  if (ref.$col !== 'f64' && n > len) throw damaged(`${what} holds at most ${len} values, not ${n}`);
}

/** The numbers of the column `ref` points at. */
function readColumn(ref: ColumnRef, places: Places, what: string): number[] {
  checkColumn(ref, places, what);
  const { n, len } = ref;
  const bytes = places.bytes(ref.at, len, what);
  // Written in full below (a shorter column is refused), so never read with holes.
  const out: number[] = new Array<number>(n);
  if (ref.$col === 'f64') {
    const view = new DataView(bytes.buffer, bytes.byteOffset, len);
    for (let i = 0; i < n; i++) out[i] = view.getFloat64(i * 8, true);
    return out;
  }
  const delta = ref.$col === 'zd';
  let k = 0;
  let prev = 0;
  let i = 0;
  const end = len;
  while (i < end) {
    let b = bytes[i++]!;
    let z = b & 127;
    // Up to four bytes (28 bits) in integer arithmetic; longer ones (addresses) in doubles.
    let shift = 7;
    while (b & 128 && i < end && shift < 28) {
      b = bytes[i++]!;
      z |= (b & 127) << shift;
      shift += 7;
    }
    if (b & 128) {
      let mult = 2 ** 28;
      while (b & 128 && i < end) {
        b = bytes[i++]!;
        z += (b & 127) * mult;
        mult *= 128;
      }
    }
    let v = z < 2 ** 30 ? ((z & 1) === 0 ? z >>> 1 : -((z + 1) >>> 1)) : z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    if (delta) v += prev;
    prev = v;
    if (k < n) out[k] = v;
    k++;
  }
  if (k !== n) throw damaged(`${what} holds ${k} values, not ${n}`);
  return out;
}

/** Restores columns and `$json` parts from the page's buffers, each when the page first reads it. */
class LazyParts {
  constructor(
    private readonly places: Places,
    /** Told of damage found only when a part is read, after the page opened. */
    private readonly onDamage: (err: unknown) => void,
  ) {}

  /** Makes `obj[key]` compute its value on first read, then hold it. */
  private lazy(obj: Record<string, unknown>, key: string, compute: () => unknown): void {
    const onDamage = this.onDamage;
    Object.defineProperty(obj, key, {
      configurable: true,
      enumerable: true,
      get() {
        let value: unknown;
        try {
          value = compute();
        } catch (err) {
          onDamage(err);
          throw err;
        }
        Object.defineProperty(obj, key, { configurable: true, enumerable: true, writable: true, value });
        return value;
      },
    });
  }

  /**
   * Puts the columns back into `value`, in place: each column reference becomes its numbers when
   * first read, so a column the page never reads (a section never opened) is never decoded.
   */
  columns(value: unknown, what: string): unknown {
    if (Array.isArray(value)) {
      // Arrays of numbers (short columns, a stack's frames) hold no reference.
      if (typeof value[0] !== 'object') return value;
      for (let i = 0; i < value.length; i++) this.slot(value as unknown as Record<string, unknown>, String(i), `${what}[${i}]`);
      return value;
    }
    if (!value || typeof value !== 'object') return value;
    if ('$col' in value) return readColumn(value as ColumnRef, this.places, what);
    const obj = value as Record<string, unknown>;
    for (const key of Object.keys(obj)) this.slot(obj, key, what ? `${what}.${key}` : key);
    return obj;
  }

  /** Restores `obj[key]`: a column or `$json` part becomes lazy, an object is restored in place. */
  private slot(obj: Record<string, unknown>, key: string, path: string): void {
    const v = obj[key];
    if (!v || typeof v !== 'object') return;
    if ('$col' in v) {
      const ref = v as ColumnRef;
      checkColumn(ref, this.places, path);
      this.lazy(obj, key, () => readColumn(ref, this.places, path));
    } else if ('$json' in v) this.part(obj, key, (v as { $json: { at: number; len: number } }).$json, path);
    else this.columns(v, path);
  }

  /** A `$json` part: its JSON is parsed from the buffer when first read. */
  private part(obj: Record<string, unknown>, key: string, place: { at: number; len: number }, path: string): void {
    if (!(place.at >= 0 && place.len >= 0 && place.at + place.len <= this.places.length)) throw damaged(`${path} points outside the buffer`);
    this.lazy(obj, key, () => {
      const bytes = this.places.bytes(place.at, place.len, path);
      let part: unknown;
      try {
        part = JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        throw damaged(`${path} is not JSON`);
      }
      return this.columns(part, path);
    });
  }
}

/** A report read in two stages: `data` is drawable once this is given; `complete` settles once every byte is in. */
export interface StagedReport {
  /** Its first frame's columns can be read at once; every other part only after `complete`. */
  readonly data: ReportData;
  /** Refused with the damage when the rest of the data cannot be read. */
  readonly complete: Promise<void>;
}

/**
 * The report data from the page's embedded JSON text (the writer's `embedReportData`,
 * stringified), given as soon as its first buffer is read (see the header). Its layout and buffers
 * are checked here; a column's own bytes only when it is read, and damage found then goes to
 * `onDamage` before the read throws. `restBase64` gives a packed page's second buffer where the
 * JSON leaves it out (html.ts carries it after the app's script); it is asked once `data` is given.
 */
export async function readEmbeddedReportInStages(text: string, onDamage: (err: unknown) => void = () => {}, restBase64?: () => Promise<string>): Promise<StagedReport> {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw damaged('it is not JSON');
  }
  if (raw.$packed) {
    const packed = raw.$packed as PackedBytes;
    const bytes = readBytes(packed, '$packed', true);
    if (!(packed.head >= 0 && packed.head <= bytes.length)) throw damaged('$packed.head is outside the buffer');
    let head: Record<string, unknown>;
    try {
      head = JSON.parse(new TextDecoder().decode(bytes.subarray(0, packed.head))) as Record<string, unknown>;
    } catch {
      throw damaged('its packed JSON is not JSON');
    }
    const rest = packed.rest;
    if (rest !== undefined && !(rest && rest.bytes >= 0)) throw damaged('$packed.rest is not an embedded buffer');
    let restBytes: Uint8Array | null = rest ? null : new Uint8Array(0);
    const complete = rest
      ? (async () => {
          const b64 = typeof rest.b64 === 'string' ? rest.b64 : restBase64 ? await restBase64() : undefined;
          if (b64 === undefined) throw damaged('$packed.rest is not in the page');
          restBytes = await readBytes({ ...rest, b64 }, '$packed.rest', false);
        })()
      : Promise.resolve();
    complete.catch(() => {});
    const places = new Places(bytes.subarray(packed.head), () => restBytes, rest ? rest.bytes : 0);
    return { data: new LazyParts(places, onDamage).columns(head, '') as ReportData, complete };
  }
  if (!raw.$columns) return { data: raw as unknown as ReportData, complete: Promise.resolve() };
  const { $columns, ...head } = raw;
  const bytes = readBytes($columns as EmbeddedBytes, '$columns', true);
  return { data: new LazyParts(new Places(bytes, () => null, 0), onDamage).columns(head, '') as ReportData, complete: Promise.resolve() };
}

/** The report data from the page's embedded JSON text, once every byte of it is in. */
export async function readEmbeddedReport(text: string, onDamage: (err: unknown) => void = () => {}): Promise<ReportData> {
  const staged = await readEmbeddedReportInStages(text, onDamage);
  await staged.complete;
  return staged.data;
}

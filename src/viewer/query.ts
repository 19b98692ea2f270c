/**
 * The query language over a snapshot report's allocations (docs/QUERY.md): filters by frame, size,
 * lifetime, liveness, phase, device, stream, pool and inferred category, then groups with totals
 * (count, bytes, bytes live at the device's peak), sorted, top N. Platform-free: the page's query
 * box and `memscope query` run the same code over the same ReportData.
 *
 *   alive@peak group:user_frame
 *   size>=1MiB lifetime>10ms -category:parameter sort:count top:10
 */
import type { AllocationFacets, ReportData, ReportDeviceMemory } from './report-data.js';

/** A query that cannot be read: `at` and `length` locate the offending token in the text. */
export class QueryError extends Error {
  override readonly name = 'QueryError';
  constructor(
    message: string,
    readonly at: number,
    readonly length: number,
  ) {
    super(message);
  }
}

export const TEXT_FIELDS = ['frame', 'user_frame', 'site', 'file', 'function', 'category', 'phase', 'device', 'pool'] as const;
export const NUMBER_FIELDS = ['size', 'lifetime', 'stream', 'step'] as const;
export const GROUP_KEYS = ['user_frame', 'site', 'file', 'function', 'category', 'phase', 'step', 'device', 'stream', 'pool'] as const;
export const SORT_KEYS = ['bytes', 'count', 'peak', 'key'] as const;
const FLAGS = ['never_freed', 'before_trace'] as const;

type TextField = (typeof TEXT_FIELDS)[number];
type NumberField = (typeof NUMBER_FIELDS)[number];
export type GroupKey = (typeof GROUP_KEYS)[number];
export type SortKey = (typeof SORT_KEYS)[number];

/** Tests one allocation (device index, allocation index). */
type Test = (d: number, a: number) => boolean;

export interface ParsedQuery {
  readonly tests: Test[];
  readonly group: GroupKey | null;
  readonly sort: SortKey;
  readonly top: number;
}

export interface QueryGroup {
  /** The group's value ("(none)" when the allocation has none). */
  readonly key: string;
  readonly count: number;
  readonly bytes: number;
  /** Bytes of the group's allocations live at their device's peak of allocated bytes. */
  readonly peakBytes: number;
}

export interface QueryResult {
  /** Per device, 1 for each matching allocation. */
  readonly matches: Uint8Array[];
  readonly count: number;
  readonly bytes: number;
  readonly peakBytes: number;
  /** Grouped totals (sorted, the top N) when the query groups; else null. */
  readonly groups: QueryGroup[] | null;
  /** How many groups there were before the top N. */
  readonly groupCount: number;
  /** Ungrouped: the top N matching allocations by the sort key, as [device, allocation]. */
  readonly allocations: [number, number][];
  readonly group: GroupKey | null;
}

const NONE = '(none)';

/** The phase run an allocation made by event `start` began in (-1: made before the trace). */
function phaseRun(f: AllocationFacets, start: number): number {
  if (start < 0) return -1;
  let lo = 0;
  let hi = f.phaseAt.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (f.phaseAt[mid]! <= start) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** The phase when an allocation was made ("unknown" before the trace), and the training step then. */
export function allocationPhase(f: AllocationFacets, start: number): { phase: string; step: number } {
  const k = phaseRun(f, start);
  return k < 0 ? { phase: f.phaseNames[0]!, step: 0 } : { phase: f.phaseNames[f.phaseOf[k]!]!, step: f.stepOf[k]! };
}

/** An allocation's first user frame, its file and function (indexes into `strings`, 0: none), from its stack. */
export function allocationUserFrame(data: ReportData, stack: number): { frame: number; file: number; function: number } {
  const u = data.memory?.userFrames;
  if (!u || stack < 0) return { frame: 0, file: 0, function: 0 };
  return { frame: u.frame[stack] ?? 0, file: u.file[stack] ?? 0, function: u.function[stack] ?? 0 };
}
const BYTE_UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, k: 1024, kib: 1024, m: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gib: 1024 ** 3, t: 1024 ** 4, tib: 1024 ** 4 };
const TIME_UNITS: Record<string, number> = { us: 1e-3, µs: 1e-3, ms: 1, s: 1000, min: 60_000 };

interface Token {
  readonly text: string;
  readonly at: number;
}

/** Splits on spaces; "double quotes" and /regex/ keep their spaces. */
function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    if (/\s/.test(text[i]!)) {
      i++;
      continue;
    }
    const at = i;
    let quote: string | null = null;
    while (i < text.length && (quote !== null || !/\s/.test(text[i]!))) {
      const c = text[i]!;
      if (quote !== null) {
        if (c === '\\' && quote === '/') i++;
        else if (c === quote) quote = null;
      } else if (c === '"' || (c === '/' && /[:=]$/.test(text.slice(at, i)))) quote = c;
      i++;
    }
    if (quote !== null) throw new QueryError(`column ${at + 1}: ${quote === '"' ? 'a quote' : 'a /regex/'} is not closed`, at, text.length - at);
    out.push({ text: text.slice(at, i), at });
  }
  return out;
}

function unquote(v: string): string {
  return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v;
}

function oneOf<T extends string>(value: string, list: readonly T[], what: string, tok: Token, at: number): T {
  const v = value.toLowerCase() as T;
  if (list.includes(v)) return v;
  throw new QueryError(`column ${at + 1}: unknown ${what} "${value}" (${what}s: ${list.join(', ')})`, at, tok.at + tok.text.length - at);
}

/** Bytes from "1MiB", "1.5 GB", "4096" (NaN if it is not a size). */
export function parseBytes(text: string): number {
  const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)$/i.exec(text.trim());
  if (!m) return NaN;
  const unit = BYTE_UNITS[(m[2] || 'b').toLowerCase()];
  return unit === undefined ? NaN : parseFloat(m[1]!) * unit;
}

/** The columns a query reads, with the time of each event. */
class Columns {
  readonly time: Float64Array[];
  readonly tEnd: number[];
  constructor(
    readonly data: ReportData,
    readonly devices: readonly ReportDeviceMemory[],
  ) {
    this.time = devices.map((d) => {
      const t = new Float64Array(d.eventDt.length);
      let us = 0;
      for (let i = 0; i < t.length; i++) t[i] = (us += d.eventDt[i]!) / 1000;
      return t;
    });
    this.tEnd = this.time.map((t) => (t.length ? t[t.length - 1]! : 0));
  }
  facets(d: number): AllocationFacets | null {
    return this.devices[d]!.facets ?? null;
  }
  str(i: number): string {
    return this.data.strings[i] ?? '';
  }
  startTime(d: number, a: number): number {
    const s = this.devices[d]!.start[a]!;
    return s < 0 ? 0 : this.time[d]![s]!;
  }
  endTime(d: number, a: number): number {
    const e = this.devices[d]!.end[a]!;
    return e < 0 ? this.tEnd[d]! : this.time[d]![e]!;
  }
  liveAtPeak(d: number, a: number): boolean {
    const f = this.facets(d);
    if (!f) return false;
    const dev = this.devices[d]!;
    return dev.start[a]! < f.peakEvents && (dev.end[a]! < 0 || dev.end[a]! >= f.peakEvents);
  }
  /** A text field's value(s) for one allocation. */
  text(field: TextField | GroupKey, d: number, a: number): string {
    const dev = this.devices[d]!;
    const f = this.facets(d);
    switch (field) {
      case 'site':
        return this.str(dev.site[a]!);
      case 'device':
        return dev.device;
      case 'user_frame':
        return this.str(allocationUserFrame(this.data, dev.stack[a]!).frame);
      case 'file':
        return this.str(allocationUserFrame(this.data, dev.stack[a]!).file);
      case 'function':
        return this.str(allocationUserFrame(this.data, dev.stack[a]!).function);
      case 'category':
        return f ? f.categoryNames[f.category[a]!]! : '';
      case 'phase':
        return f ? allocationPhase(f, dev.start[a]!).phase : '';
      case 'pool':
        return f ? this.str(f.pool[a]!) : '';
      case 'stream':
        return f ? String(f.stream[a]) : '';
      case 'step':
        return f ? String(allocationPhase(f, dev.start[a]!).step) : '';
      case 'frame':
        return '';
    }
  }
  frames(d: number, a: number): string[] {
    const s = this.devices[d]!.stack[a]!;
    return s >= 0 ? (this.data.stacks[s] ?? []).map((i) => this.str(i)) : [];
  }
}

function textTest(cols: Columns, field: TextField, value: string, exact: boolean, tok: Token, at: number): Test {
  let match: (s: string) => boolean;
  const rx = /^\/(.*)\/([a-z]*)$/s.exec(value);
  if (rx) {
    let re: RegExp;
    try {
      re = new RegExp(rx[1]!, rx[2]!.includes('i') ? rx[2] : `${rx[2]}i`);
    } catch (e) {
      throw new QueryError(`column ${at + 1}: bad regular expression ${value} (${(e as Error).message})`, at, value.length);
    }
    match = (s) => re.test(s);
  } else {
    const needle = unquote(value).toLowerCase();
    if (!needle) throw new QueryError(`column ${at + 1}: ${field} needs a value, e.g. ${field}:optim`, tok.at, tok.text.length);
    match = exact ? (s) => s.toLowerCase() === needle : (s) => s.toLowerCase().includes(needle);
  }
  if (field === 'frame') {
    // Any frame of the stack, or the site: stacks repeat, so each is tested once.
    const cache = new Map<number, boolean>();
    return (d, a) => {
      const s = cols.devices[d]!.stack[a]!;
      let hit = cache.get(s);
      if (hit === undefined) {
        hit = cols.frames(d, a).some(match);
        cache.set(s, hit);
      }
      return hit || match(cols.text('site', d, a));
    };
  }
  return (d, a) => match(cols.text(field, d, a));
}

function numberTest(cols: Columns, field: NumberField, op: string, value: string, tok: Token, at: number): Test {
  const parse = (v: string, vat: number): number => {
    let x: number;
    if (field === 'size') x = parseBytes(v);
    else if (field === 'lifetime') {
      const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([a-zµ]*)$/i.exec(v);
      const unit = m?.[2]?.toLowerCase() ?? '';
      if (unit && cols.data.timeUnit === 'event') throw new QueryError(`column ${vat + 1}: this snapshot has no times (no time_us); give lifetime in events, e.g. lifetime>100`, vat, v.length);
      const mult = unit ? TIME_UNITS[unit] : 1;
      x = m && mult !== undefined ? parseFloat(m[1]!) * mult : NaN;
    } else x = /^-?\d+$/.test(v) ? Number(v) : NaN;
    if (Number.isNaN(x)) {
      const hint = field === 'size' ? 'a size such as 512, 4KiB, 1.5MiB, 2GB' : field === 'lifetime' ? 'a time such as 250us, 10ms, 2s' : 'a whole number';
      throw new QueryError(`column ${vat + 1}: "${v}" is not ${hint}`, vat, Math.max(1, v.length));
    }
    return x;
  };
  const valueOf = (d: number, a: number): number => {
    if (field === 'size') return cols.devices[d]!.bytes[a]!;
    if (field === 'lifetime') return cols.endTime(d, a) - cols.startTime(d, a);
    const f = cols.facets(d);
    if (!f) return NaN;
    return field === 'stream' ? f.stream[a]! : allocationPhase(f, cols.devices[d]!.start[a]!).step;
  };
  const vat = tok.at + tok.text.length - value.length;
  if (op === ':') {
    const r = /^(.*?)\.\.(.*)$/.exec(value);
    if (!r) throw new QueryError(`column ${vat + 1}: ${field}: takes a range A..B (either end may be left out); use ${field}>=, ${field}< … for one bound`, vat, Math.max(1, value.length));
    const lo = r[1] ? parse(r[1], vat) : -Infinity;
    const hi = r[2] ? parse(r[2], vat + r[1]!.length + 2) : Infinity;
    return (d, a) => {
      const x = valueOf(d, a);
      return x >= lo && x <= hi;
    };
  }
  const x = parse(value, vat);
  const cmp: Record<string, (v: number) => boolean> = {
    '<': (v) => v < x,
    '<=': (v) => v <= x,
    '>': (v) => v > x,
    '>=': (v) => v >= x,
    '=': (v) => v === x,
    '!=': (v) => v !== x,
  };
  const c = cmp[op]!;
  return (d, a) => c(valueOf(d, a));
}

function aliveTest(cols: Columns, value: string, tok: Token, at: number): Test {
  if (value.toLowerCase() === 'peak') return (d, a) => cols.liveAtPeak(d, a);
  const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([a-zµ]*)$/i.exec(value);
  const unit = m?.[2]?.toLowerCase() ?? '';
  if (m && unit && cols.data.timeUnit === 'event') throw new QueryError(`column ${at + 1}: this snapshot has no times (no time_us); give the event number, e.g. alive@1200`, at, value.length);
  const mult = unit ? TIME_UNITS[unit] : 1;
  if (!m || mult === undefined) throw new QueryError(`column ${at + 1}: alive@ takes "peak" or a time such as 12.5ms`, at, Math.max(1, tok.at + tok.text.length - at));
  const t = parseFloat(m[1]!) * mult;
  return (d, a) => {
    const dev = cols.devices[d]!;
    return (dev.start[a]! < 0 || cols.startTime(d, a) <= t) && (dev.end[a]! < 0 || cols.endTime(d, a) > t);
  };
}

/** Reads a query; throws QueryError naming the column of the first token it cannot use. */
export function parseQuery(data: ReportData, text: string): ParsedQuery {
  const devices = data.memory?.devices ?? [];
  const cols = new Columns(data, devices);
  const tests: Test[] = [];
  let group: GroupKey | null = null;
  let sort: SortKey = 'bytes';
  let top = 50;
  for (const tok of tokenize(text)) {
    const negate = tok.text.startsWith('-') && tok.text.length > 1;
    const body = negate ? tok.text.slice(1) : tok.text;
    const bodyAt = tok.at + (negate ? 1 : 0);
    let test: Test | null = null;
    const opMatch = /^([a-z_]+)(<=|>=|!=|<|>|=|:|@)(.*)$/is.exec(body);
    if (opMatch) {
      const [, rawName, op, value] = opMatch as unknown as [string, string, string, string];
      const name = rawName.toLowerCase();
      const valueAt = bodyAt + rawName.length + op.length;
      if (name === 'group' || name === 'sort' || name === 'top') {
        if (negate || op !== ':') throw new QueryError(`column ${tok.at + 1}: write ${name}:VALUE`, tok.at, tok.text.length);
        if (name === 'group') group = oneOf(value, GROUP_KEYS, 'group key', tok, valueAt);
        else if (name === 'sort') sort = oneOf(value, SORT_KEYS, 'sort key', tok, valueAt);
        else {
          if (!/^\d+$/.test(value) || Number(value) < 1) throw new QueryError(`column ${valueAt + 1}: top: takes a count such as 20`, valueAt, Math.max(1, value.length));
          top = Number(value);
        }
        continue;
      }
      if (name === 'alive') {
        if (op !== '@') throw new QueryError(`column ${tok.at + 1}: write alive@peak or alive@TIME`, tok.at, tok.text.length);
        test = aliveTest(cols, value, tok, valueAt);
      } else if ((TEXT_FIELDS as readonly string[]).includes(name)) {
        if (op !== ':' && op !== '=' && op !== '!=') throw new QueryError(`column ${bodyAt + rawName.length + 1}: ${name} takes ${name}:TEXT, ${name}:/regex/ or ${name}=VALUE`, bodyAt + rawName.length, op.length);
        const t = textTest(cols, name as TextField, value, op !== ':', tok, valueAt);
        test = op === '!=' ? (d, a) => !t(d, a) : t;
      } else if ((NUMBER_FIELDS as readonly string[]).includes(name)) {
        if (op === '@') throw new QueryError(`column ${bodyAt + rawName.length + 1}: ${name} takes a comparison (${name}>=VALUE) or a range (${name}:A..B)`, bodyAt + rawName.length, 1);
        test = numberTest(cols, name as NumberField, op, value, tok, valueAt);
      } else {
        throw new QueryError(`column ${bodyAt + 1}: unknown field "${rawName}" (fields: ${[...TEXT_FIELDS, ...NUMBER_FIELDS, 'alive', 'group', 'sort', 'top'].join(', ')})`, bodyAt, rawName.length);
      }
    } else if ((FLAGS as readonly string[]).includes(body.toLowerCase())) {
      test = body.toLowerCase() === 'never_freed' ? (d, a) => devices[d]!.end[a]! < 0 : (d, a) => devices[d]!.start[a]! < 0;
    } else if (/^[<>=!]/.test(body)) {
      throw new QueryError(`column ${bodyAt + 1}: a comparison needs a field before it, e.g. size${body}`, bodyAt, body.length);
    } else {
      // A bare word: text in any frame, as the search box reads it.
      test = textTest(cols, 'frame', body, false, tok, bodyAt);
    }
    tests.push(negate ? (d, a) => !test!(d, a) : test);
  }
  return { tests, group, sort, top };
}

/** Runs a parsed query over every device's allocations. */
export function runQuery(data: ReportData, q: ParsedQuery): QueryResult {
  const devices = data.memory?.devices ?? [];
  const cols = new Columns(data, devices);
  const matches: Uint8Array[] = [];
  let count = 0;
  let bytes = 0;
  let peakBytes = 0;
  const groups = new Map<string, { count: number; bytes: number; peakBytes: number }>();
  const hits: [number, number][] = [];
  devices.forEach((dev, d) => {
    const m = new Uint8Array(dev.bytes.length);
    next: for (let a = 0; a < dev.bytes.length; a++) {
      for (const t of q.tests) if (!t(d, a)) continue next;
      m[a] = 1;
      const b = dev.bytes[a]!;
      const atPeak = cols.liveAtPeak(d, a) ? b : 0;
      count++;
      bytes += b;
      peakBytes += atPeak;
      if (q.group) {
        const key = cols.text(q.group, d, a) || NONE;
        const g = groups.get(key) ?? { count: 0, bytes: 0, peakBytes: 0 };
        g.count++;
        g.bytes += b;
        g.peakBytes += atPeak;
        groups.set(key, g);
      } else hits.push([d, a]);
    }
    matches.push(m);
  });
  let rows: QueryGroup[] | null = null;
  if (q.group) {
    const numericKey = q.group === 'step' || q.group === 'stream';
    rows = [...groups].map(([key, g]) => ({ key, ...g }));
    rows.sort((x, y) => {
      if (q.sort === 'key') return numericKey ? Number(x.key) - Number(y.key) : x.key.localeCompare(y.key);
      const k = q.sort === 'count' ? 'count' : q.sort === 'peak' ? 'peakBytes' : 'bytes';
      return y[k] - x[k] || y.bytes - x.bytes || x.key.localeCompare(y.key);
    });
  } else {
    const by = (d: number, a: number): number => (q.sort === 'peak' ? (cols.liveAtPeak(d, a) ? devices[d]!.bytes[a]! : 0) : q.sort === 'key' ? -cols.startTime(d, a) : devices[d]!.bytes[a]!);
    hits.sort((x, y) => by(y[0], y[1]) - by(x[0], x[1]) || devices[y[0]]!.bytes[y[1]]! - devices[x[0]]!.bytes[x[1]]!);
  }
  return {
    matches,
    count,
    bytes,
    peakBytes,
    groups: rows ? rows.slice(0, q.top) : null,
    groupCount: rows?.length ?? 0,
    allocations: hits.slice(0, q.top),
    group: q.group,
  };
}

/** The value `group` gives each allocation (device, allocation), as the result's group keys name it. */
export function groupKeyOf(data: ReportData, group: GroupKey): (d: number, a: number) => string {
  const cols = new Columns(data, data.memory?.devices ?? []);
  return (d, a) => cols.text(group, d, a) || NONE;
}

/** Parses and runs `text`; throws QueryError for a query it cannot read. */
export function query(data: ReportData, text: string): QueryResult {
  return runQuery(data, parseQuery(data, text));
}

import { MemscopeError } from '../core/errors.js';
import { CAPTURE_FORMAT, CAPTURE_VERSION, type CaptureEndInfo, type CaptureHeader, type ModuleStates } from './types.js';

/** One storage's life as a capture recorded it. */
export interface CapturedAlloc {
  readonly id: number;
  /** Allocation time, ms since the capture began. */
  readonly t: number;
  /** Free time, or null if still alive when the capture ended. */
  freeT: number | null;
  readonly device: string;
  readonly bytes: number;
  /** Latest category (a storage can be re-categorised after its allocation). */
  category: string;
  readonly layer: string | null;
  readonly phase: string;
  readonly kernel: string | null;
  /** Stack id (see `Capture.stacks`), 0 for none (a `t` record can set it after the alloc record). */
  stack: number;
  /** Optimizer steps completed when it was allocated: it belongs to step `step + 1`. */
  readonly step: number;
  /** Index of its alloc event in `Capture.events`: orders it against step ends exactly. */
  readonly seq: number;
  /** Index of its free event in `Capture.events`, or null while alive. */
  freeSeq: number | null;
}

export interface CapturedModule {
  readonly id: number;
  readonly path: string;
  readonly className: string;
  readonly parentId: number;
  states: ModuleStates | null;
}

export interface CapturedStep {
  readonly t: number;
  /** Steps completed, 1-based. */
  readonly step: number;
  readonly live: Record<string, Record<string, number>>;
  /** Events (`Capture.events`) before this step end. */
  readonly seq: number;
}

/**
 * A step boundary that is not an optimizer step: the end of a top-level
 * inference call (`predict`, `execute`, `executeAsync`) or an explicit
 * `step()` mark from the program.
 */
export interface CapturedMark {
  readonly t: number;
  /** 'predict', 'execute', 'executeAsync' or 'step'. */
  readonly kind: string;
  /** Events (`Capture.events`) before this mark. */
  readonly seq: number;
}

export interface CapturedKernel {
  readonly name: string;
  readonly calls: number;
  readonly bytesAllocated: number;
  readonly bytesRetained: number;
  readonly peakAdded: number;
}

/** Alloc or free, in capture order: the timeline. `index` points into `Capture.allocs`. */
export interface CapturedEvent {
  readonly t: number;
  readonly alloc: number;
  readonly kind: 'alloc' | 'free';
}

export interface Truncation {
  /** Why the capture is incomplete, in words. */
  readonly reason: string;
  /** 1-based line where reading stopped. */
  readonly line: number;
  /** Bytes after the last complete record that were ignored. */
  readonly bytesIgnored: number;
}

export interface Capture {
  readonly header: CaptureHeader;
  readonly allocs: CapturedAlloc[];
  readonly events: CapturedEvent[];
  readonly modules: CapturedModule[];
  readonly steps: CapturedStep[];
  /** Inference-call ends and explicit step marks, in order. */
  readonly marks: CapturedMark[];
  readonly kernels: CapturedKernel[];
  /** Frames by stack id. */
  readonly stacks: Map<number, string[]>;
  readonly end: (CaptureEndInfo & { t: number }) | null;
  /** Set when the file ended early (killed process, crash, or cut copy). */
  readonly truncated: Truncation | null;
  /** Frees of storages the capture never saw allocated (made before recording began). */
  readonly unmatchedFrees: number;
}

/** Cheap check used to tell a capture from a snapshot or trace. */
export function looksLikeCapture(head: string): boolean {
  return head.trimStart().startsWith('{') && head.includes(`"${CAPTURE_FORMAT}"`);
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const TAG_A = 0x61; // 'a'
const TAG_F = 0x66; // 'f'
/** Numbers after the tag of an `a` record. */
const ALLOC_FIELDS = 10;

/**
 * Reads exactly `count` comma-separated plain decimal numbers (optional minus
 * sign, digits, optional fraction) from `line` at `at` up to its closing `]`,
 * into `out`. False when the text is anything else; the caller then parses
 * the line as JSON and checks it field by field.
 */
function readNumbers(line: string, at: number, out: Float64Array, count: number): boolean {
  const end = line.length - 1;
  if (line.charCodeAt(end) !== 0x5d) return false; // ']'
  for (let k = 0; k < count; k++) {
    let negative = false;
    if (line.charCodeAt(at) === 0x2d) {
      negative = true;
      at++;
    }
    let value = 0;
    let digits = 0;
    let c = line.charCodeAt(at);
    while (c >= 0x30 && c <= 0x39) {
      value = value * 10 + (c - 0x30);
      digits++;
      c = line.charCodeAt(++at);
    }
    if (digits === 0 || digits > 15) return false;
    if (c === 0x2e) {
      let scale = 1;
      let fraction = 0;
      let fractionDigits = 0;
      c = line.charCodeAt(++at);
      while (c >= 0x30 && c <= 0x39) {
        fraction = fraction * 10 + (c - 0x30);
        scale *= 10;
        fractionDigits++;
        c = line.charCodeAt(++at);
      }
      if (fractionDigits === 0 || digits + fractionDigits > 15) return false; // exact as integers below 2^53
      value = (value * scale + fraction) / scale;
    }
    out[k] = negative ? -value : value;
    if (k < count - 1) {
      if (c !== COMMA) return false;
      at++;
    } else if (at !== end) return false;
  }
  return true;
}

/** The header fields readers use, with the types the writer gives them. */
function checkHeader(h: Record<string, unknown>, source: string): void {
  const fail = (field: string, expected: string): never => {
    throw new MemscopeError('bad-capture', `${source}: line 1: header field "${field}" is ${JSON.stringify(h[field]) ?? 'missing'}, expected ${expected}`);
  };
  if (!Array.isArray(h.argv) || !h.argv.every((a) => typeof a === 'string')) fail('argv', 'a list of strings');
  if (h.backend !== null && h.backend !== undefined && typeof h.backend !== 'string') fail('backend', 'a string or null');
  if (typeof h.stacks !== 'boolean') fail('stacks', 'true or false');
  if (h.maxEntries !== null && h.maxEntries !== undefined && typeof h.maxEntries !== 'number') fail('maxEntries', 'a number or null');
  if (h.created !== undefined && typeof h.created !== 'string') fail('created', 'a string');
}

/**
 * Parses capture text. A damaged tail — a last line cut mid-record, or no end
 * record — is reported in `truncated` and everything before it is kept; damage
 * anywhere else is a MemscopeError naming the line.
 */
export function parseCapture(text: string, source = 'capture'): Capture {
  const lines = text.split('\n');
  const endsWithNewline = text.endsWith('\n');
  const n = endsWithNewline ? lines.length - 1 : lines.length;

  let header: CaptureHeader;
  try {
    header = JSON.parse(lines[0]);
  } catch {
    throw new MemscopeError('bad-capture', `${source}: line 1 is not a memscope capture header`);
  }
  if (!header || header.format !== CAPTURE_FORMAT) {
    throw new MemscopeError('bad-capture', `${source}: line 1 is not a memscope capture header (format ${JSON.stringify(header?.format)})`);
  }
  if (typeof header.version !== 'number' || header.version > CAPTURE_VERSION) {
    throw new MemscopeError('bad-capture', `${source}: capture format version ${header.version} is newer than this memscope reads (${CAPTURE_VERSION})`);
  }
  checkHeader(header as unknown as Record<string, unknown>, source);

  const strings: string[] = [''];
  const stacks = new Map<number, string[]>();
  const allocs: CapturedAlloc[] = [];
  const byStorage = new Map<number, number>();
  const events: CapturedEvent[] = [];
  const modules = new Map<number, CapturedModule>();
  const steps: CapturedStep[] = [];
  const marks: CapturedMark[] = [];
  const kernels = new Map<string, CapturedKernel>();
  let end: Capture['end'] = null;
  let truncated: Truncation | null = null;
  let unmatchedFrees = 0;
  const s = (id: unknown): string => (typeof id === 'number' && id > 0 ? strings[id] ?? '' : '');

  const fields = new Float64Array(ALLOC_FIELDS);
  for (let i = 1; i < n; i++) {
    const line = lines[i];
    if (line === '') continue;
    // Fast path for the records that make up most of a capture: an alloc or a free whose
    // fields are plain numbers. Anything else (or anything odd) takes the checked path below.
    if (line.charCodeAt(1) === QUOTE && line.charCodeAt(3) === QUOTE && line.charCodeAt(4) === COMMA) {
      const tag = line.charCodeAt(2);
      if (tag === TAG_A && readNumbers(line, 5, fields, ALLOC_FIELDS)) {
        const index = allocs.length;
        const id = fields[1];
        allocs.push({
          id,
          t: fields[0],
          freeT: null,
          device: s(fields[2]),
          bytes: fields[3],
          category: s(fields[4]),
          layer: s(fields[5]) || null,
          phase: s(fields[6]) || 'none',
          kernel: s(fields[7]) || null,
          stack: fields[8],
          step: fields[9],
          seq: events.length,
          freeSeq: null,
        });
        byStorage.set(id, index);
        events.push({ t: fields[0], alloc: index, kind: 'alloc' });
        continue;
      }
      if (tag === TAG_F && readNumbers(line, 5, fields, 2)) {
        const index = byStorage.get(fields[1]);
        if (index === undefined) unmatchedFrees++;
        else {
          byStorage.delete(fields[1]);
          allocs[index].freeT = fields[0];
          allocs[index].freeSeq = events.length;
          events.push({ t: fields[0], alloc: index, kind: 'free' });
        }
        continue;
      }
    }
    let rec: unknown[];
    try {
      rec = JSON.parse(line);
    } catch {
      if (i === n - 1 && !endsWithNewline) {
        truncated = { reason: 'the last record was cut off mid-write', line: i + 1, bytesIgnored: line.length };
        break;
      }
      throw new MemscopeError('bad-capture', `${source}: line ${i + 1} is not a JSON record: ${line.slice(0, 60)}`);
    }
    if (!Array.isArray(rec) || typeof rec[0] !== 'string') {
      throw new MemscopeError('bad-capture', `${source}: line ${i + 1} is not a capture record`);
    }
    const bad = (what: string): MemscopeError =>
      new MemscopeError('bad-capture', `${source}: line ${i + 1}: ${what}: ${line.length > 80 ? `${line.slice(0, 77)}...` : line}`);
    const num = (k: number, name: string): number => {
      const v = rec[k];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`field ${k} (${name}) of a "${rec[0]}" record is not a number`);
      return v;
    };
    const obj = (k: number, name: string): Record<string, unknown> => {
      const v = rec[k];
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad(`field ${k} (${name}) of a "${rec[0]}" record is not an object`);
      return v as Record<string, unknown>;
    };
    switch (rec[0]) {
      case 's':
        if (typeof rec[2] !== 'string') throw bad('field 2 (text) of a "s" record is not a string');
        strings[num(1, 'string id')] = rec[2];
        break;
      case 'k': {
        const id = num(1, 'stack id');
        const frames = rec[2];
        if (!Array.isArray(frames) || !frames.every((f) => typeof f === 'number')) throw bad('field 2 (frames) of a "k" record is not a list of string ids');
        stacks.set(id, frames.map(s));
        break;
      }
      case 'M': {
        const id = num(1, 'module id');
        modules.set(id, { id, path: s(num(2, 'path')), className: s(num(3, 'class')), parentId: num(4, 'parent id'), states: null });
        break;
      }
      case 'a': {
        const index = allocs.length;
        const t = num(1, 't');
        const id = num(2, 'storage id');
        const layer = s(num(6, 'layer'));
        const kernel = s(num(8, 'kernel'));
        allocs.push({
          id,
          t,
          freeT: null,
          device: s(num(3, 'device')),
          bytes: num(4, 'bytes'),
          category: s(num(5, 'category')),
          layer: layer || null,
          phase: s(num(7, 'phase')) || 'none',
          kernel: kernel || null,
          stack: num(9, 'stack'),
          step: num(10, 'step'),
          seq: events.length,
          freeSeq: null,
        });
        byStorage.set(id, index);
        events.push({ t, alloc: index, kind: 'alloc' });
        break;
      }
      case 'f': {
        const t = num(1, 't');
        const index = byStorage.get(num(2, 'storage id'));
        if (index === undefined) {
          unmatchedFrees++;
          break;
        }
        byStorage.delete(rec[2] as number);
        allocs[index].freeT = t;
        allocs[index].freeSeq = events.length;
        events.push({ t, alloc: index, kind: 'free' });
        break;
      }
      case 'c': {
        const index = byStorage.get(num(1, 'storage id'));
        const category = s(num(2, 'category'));
        if (index !== undefined) allocs[index].category = category;
        break;
      }
      case 't': {
        const index = byStorage.get(num(1, 'storage id'));
        const stack = num(2, 'stack');
        if (index !== undefined) allocs[index].stack = stack;
        break;
      }
      case 'p': {
        const live = obj(3, 'live bytes');
        steps.push({ t: num(1, 't'), step: num(2, 'step'), live: live as CapturedStep['live'], seq: events.length });
        break;
      }
      case 'm': {
        const t = num(1, 't');
        const kind = s(num(2, 'kind'));
        marks.push({ t, kind: kind || 'step', seq: events.length });
        break;
      }
      case 'S': {
        const states = obj(2, 'states');
        const m = modules.get(num(1, 'module id'));
        if (m) m.states = states as unknown as ModuleStates;
        break;
      }
      case 'K': {
        const name = s(num(1, 'kernel'));
        kernels.set(name, { name, calls: num(2, 'calls'), bytesAllocated: num(3, 'bytes allocated'), bytesRetained: num(4, 'bytes retained'), peakAdded: num(5, 'peak added') });
        break;
      }
      case 'e':
        end = { t: num(1, 't'), ...(obj(2, 'end info') as unknown as CaptureEndInfo) };
        break;
      default:
        // Unknown tags come from a newer writer of the same version: skip, don't fail.
        break;
    }
  }
  if (!truncated && !end) {
    truncated = { reason: 'the capture has no end record (the program was killed or crashed before memscope finished writing, or is still running)', line: n, bytesIgnored: 0 };
  }
  return {
    header,
    allocs,
    events,
    modules: [...modules.values()],
    steps,
    marks,
    kernels: [...kernels.values()],
    stacks,
    end,
    truncated,
    unmatchedFrees,
  };
}

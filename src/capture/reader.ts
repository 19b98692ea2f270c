import { MemscopeError } from '../core/errors.js';
import { CAPTURE_FORMAT, CAPTURE_VERSION, type CaptureEndInfo, type CaptureHeader, type ModuleStates } from './types.js';
import { CapturedAllocs } from './captured-allocs.js';

export { CapturedAllocs, type CapturedAlloc } from './captured-allocs.js';

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
  /** Timeline events (`Capture.eventCount`) before this step end. */
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
  /** Timeline events (`Capture.eventCount`) before this mark. */
  readonly seq: number;
}

export interface CapturedKernel {
  readonly name: string;
  readonly calls: number;
  readonly bytesAllocated: number;
  readonly bytesRetained: number;
  readonly peakAdded: number;
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
  /** One storage's life each, as columns. */
  readonly allocs: CapturedAllocs;
  /**
   * Allocs and frees matched to an allocation: the timeline's events. Event `seq` of each
   * allocation is its alloc, event `freeSeq` its free; no list of events is kept, as one object
   * per event would be a third of a capture's memory.
   */
  readonly eventCount: number;
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
const CR = 0x0d;
const BOM = 0xfeff;
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
  // An unknown recorder reads as memscope run's: the field only changes how advice is worded.
  if (h.recorder !== undefined && h.recorder !== 'run' && h.recorder !== 'browser') delete h.recorder;
}

/**
 * Parses capture text. A damaged tail — a last line cut mid-record, or no end
 * record — is reported in `truncated` and everything before it is kept; damage
 * anywhere else is a MemscopeError naming the line.
 */
export function parseCapture(text: string, source = 'capture'): Capture {
  const parser = new CaptureParser(source);
  parser.push(text);
  return parser.end();
}

/**
 * Reads a capture from its bytes, in chunks of any size (a file's, inflated if it was gzipped, or
 * a dropped Blob's): decoded as they come, so neither the file nor its text is ever held whole.
 */
export async function readCaptureChunks(chunks: AsyncIterable<Uint8Array>, source = 'capture'): Promise<Capture> {
  // As Buffer#toString of the whole file would: a byte-order mark stays and reaches the parser
  // (which knows it), and bytes that are not UTF-8 become U+FFFD.
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const parser = new CaptureParser(source);
  try {
    for await (const chunk of chunks) parser.push(decoder.decode(chunk, { stream: true }));
  } catch (err) {
    // A gzipped capture cut short is read as a plain one would be: what inflated is kept, and the
    // parser names the cut (no end record, or a record cut off mid-write).
    if (!(err instanceof MemscopeError && err.code === 'gzip-truncated')) throw err;
  }
  parser.push(decoder.decode());
  return parser.end();
}

/**
 * The longest line the reader holds. memscope writes none near it (its longest are a header with a
 * long command line, or a module's state table); past it a line is damage — a crashed run's tail of
 * zero bytes, or a file that is not a capture — and is not kept whole.
 */
export const MAX_CAPTURE_LINE = 1 << 26;

/**
 * The capture reader, fed text in pieces of any size (`push`, then `end`): a capture is read line by
 * line as it arrives, so no string ever holds the whole file — a long run's capture can pass the
 * engine's longest string (2^29 characters) — and each record becomes the model as it is read.
 * Pieces may cut a line, or a character's UTF-16 pair, anywhere; the result equals `parseCapture`
 * of the whole text.
 */
export class CaptureParser {
  /** The text after the last line end seen: the start of a line still arriving. */
  private pending = '';
  /** Characters of a line still arriving that passed MAX_CAPTURE_LINE (then not kept), else 0. */
  private overlong = 0;
  /** Lines read so far (1-based number of the last one). */
  private lineNumber = 0;
  private header: CaptureHeader | null = null;
  private readonly strings: string[] = [''];
  private readonly stacks = new Map<number, string[]>();
  private readonly allocs = new CapturedAllocs(this.strings);
  private readonly byStorage = new Map<number, number>();
  private eventCount = 0;
  private readonly modules = new Map<number, CapturedModule>();
  private readonly steps: CapturedStep[] = [];
  private readonly marks: CapturedMark[] = [];
  private readonly kernels = new Map<string, CapturedKernel>();
  private endRecord: Capture['end'] = null;
  private truncated: Truncation | null = null;
  private unmatchedFrees = 0;
  private readonly fields = new Float64Array(ALLOC_FIELDS);
  private ended = false;

  constructor(private readonly source = 'capture') {}

  /** Reads the complete lines `text` finishes; the rest waits for the next piece. */
  push(text: string): void {
    if (this.ended) throw new Error('CaptureParser: push after end');
    let from = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
      if (this.overlong > 0) throw this.overlongLine();
      const piece = text.slice(from, nl);
      const line = this.pending === '' ? piece : this.pending + piece;
      this.pending = '';
      from = nl + 1;
      this.line(line, false);
      if (this.truncated) return;
    }
    if (from >= text.length) return;
    if (this.overlong > 0) this.overlong += text.length - from;
    else if (this.pending.length + text.length - from > MAX_CAPTURE_LINE) {
      this.overlong = this.pending.length + text.length - from;
      this.pending = '';
    } else this.pending += text.slice(from);
  }

  private overlongLine(): MemscopeError {
    return new MemscopeError('bad-capture', `${this.source}: line ${this.lineNumber + 1} is longer than ${MAX_CAPTURE_LINE.toLocaleString('en-US')} characters, which no capture record is`);
  }

  /** The capture: the last line read (one without a line end may be cut mid-write). */
  end(): Capture {
    if (!this.ended) {
      this.ended = true;
      if (this.overlong > 0) {
        // Too long to be a record, and last: the file's damaged tail, dropped as a cut record is.
        if (this.lineNumber === 0) throw this.overlongLine();
        this.lineNumber++;
        this.truncated ??= { reason: `the last line is not a record (${this.overlong.toLocaleString('en-US')} characters without a line end)`, line: this.lineNumber, bytesIgnored: this.overlong };
      }
      // A file without a line end after its last record: that record may be cut (text.split's last piece).
      else if (this.pending !== '' || this.lineNumber === 0) this.line(this.pending, true);
      this.pending = '';
    }
    const header = this.header!;
    let truncated = this.truncated;
    if (!truncated && !this.endRecord) {
      truncated = { reason: 'the capture has no end record (the program was killed or crashed before memscope finished writing, or is still running)', line: this.lineNumber, bytesIgnored: 0 };
    }
    return {
      header,
      allocs: this.allocs,
      eventCount: this.eventCount,
      modules: [...this.modules.values()],
      steps: this.steps,
      marks: this.marks,
      kernels: [...this.kernels.values()],
      stacks: this.stacks,
      end: this.endRecord,
      truncated,
      unmatchedFrees: this.unmatchedFrees,
    };
  }

  private line(text: string, last: boolean): void {
    this.lineNumber++;
    if (this.truncated) return;
    // CRLF line ends (a capture passed through a Windows tool) read as LF ones.
    const line = text.charCodeAt(text.length - 1) === CR ? text.slice(0, -1) : text;
    if (this.header === null) {
      // A byte-order mark an editor put before the header is not part of it.
      this.header = readHeader(line.charCodeAt(0) === BOM ? line.slice(1) : line, this.source);
      return;
    }
    if (line === '') return;
    if (this.record(line)) return;
    this.checkedRecord(line, last);
  }

  /**
   * The records that make up most of a capture: an alloc or a free whose fields are plain numbers.
   * False for anything else (or anything odd), which takes the checked path.
   */
  private record(line: string): boolean {
    if (line.charCodeAt(1) !== QUOTE || line.charCodeAt(3) !== QUOTE || line.charCodeAt(4) !== COMMA) return false;
    const tag = line.charCodeAt(2);
    const fields = this.fields;
    if (tag === TAG_A && readNumbers(line, 5, fields, ALLOC_FIELDS)) {
      const index = this.allocs.add(fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7], fields[8], fields[9], this.eventCount++);
      this.byStorage.set(fields[1], index);
      return true;
    }
    if (tag === TAG_F && readNumbers(line, 5, fields, 2)) {
      this.free(fields[0], fields[1]);
      return true;
    }
    return false;
  }

  private free(t: number, storage: number): void {
    const index = this.byStorage.get(storage);
    if (index === undefined) {
      this.unmatchedFrees++;
      return;
    }
    this.byStorage.delete(storage);
    this.allocs.freeT[index] = t;
    this.allocs.freeSeq[index] = this.eventCount++;
  }

  /** Any record, parsed as JSON and checked field by field. */
  private checkedRecord(line: string, last: boolean): void {
    const source = this.source;
    const lineNumber = this.lineNumber;
    let rec: unknown[];
    try {
      rec = JSON.parse(line);
    } catch {
      if (last) {
        this.truncated = { reason: 'the last record was cut off mid-write', line: lineNumber, bytesIgnored: line.length };
        return;
      }
      throw new MemscopeError('bad-capture', `${source}: line ${lineNumber} is not a JSON record: ${line.slice(0, 60)}`);
    }
    if (!Array.isArray(rec) || typeof rec[0] !== 'string') {
      throw new MemscopeError('bad-capture', `${source}: line ${lineNumber} is not a capture record`);
    }
    const strings = this.strings;
    const s = (id: unknown): string => (typeof id === 'number' && id > 0 ? strings[id] ?? '' : '');
    const bad = (what: string): MemscopeError =>
      new MemscopeError('bad-capture', `${source}: line ${lineNumber}: ${what}: ${line.length > 80 ? `${line.slice(0, 77)}...` : line}`);
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
        this.stacks.set(id, frames.map(s));
        break;
      }
      case 'M': {
        const id = num(1, 'module id');
        this.modules.set(id, { id, path: s(num(2, 'path')), className: s(num(3, 'class')), parentId: num(4, 'parent id'), states: null });
        break;
      }
      case 'a': {
        // Fields checked in the record's order, so the first wrong one is named.
        const t = num(1, 't');
        const id = num(2, 'storage id');
        const device = num(3, 'device');
        const bytes = num(4, 'bytes');
        const category = num(5, 'category');
        const layer = num(6, 'layer');
        const phase = num(7, 'phase');
        const kernel = num(8, 'kernel');
        const stack = num(9, 'stack');
        const step = num(10, 'step');
        this.byStorage.set(id, this.allocs.add(t, id, device, bytes, category, layer, phase, kernel, stack, step, this.eventCount++));
        break;
      }
      case 'f':
        this.free(num(1, 't'), num(2, 'storage id'));
        break;
      case 'c': {
        const index = this.byStorage.get(num(1, 'storage id'));
        const category = this.allocs.known(num(2, 'category'));
        if (index !== undefined) this.allocs.category[index] = category;
        break;
      }
      case 't': {
        const index = this.byStorage.get(num(1, 'storage id'));
        const stack = num(2, 'stack');
        if (index !== undefined) this.allocs.stack[index] = stack;
        break;
      }
      case 'p': {
        const live = obj(3, 'live bytes');
        this.steps.push({ t: num(1, 't'), step: num(2, 'step'), live: live as CapturedStep['live'], seq: this.eventCount });
        break;
      }
      case 'm': {
        const t = num(1, 't');
        const kind = s(num(2, 'kind'));
        this.marks.push({ t, kind: kind || 'step', seq: this.eventCount });
        break;
      }
      case 'S': {
        const states = obj(2, 'states');
        const m = this.modules.get(num(1, 'module id'));
        if (m) m.states = states as unknown as ModuleStates;
        break;
      }
      case 'K': {
        const name = s(num(1, 'kernel'));
        this.kernels.set(name, { name, calls: num(2, 'calls'), bytesAllocated: num(3, 'bytes allocated'), bytesRetained: num(4, 'bytes retained'), peakAdded: num(5, 'peak added') });
        break;
      }
      case 'e':
        this.endRecord = { t: num(1, 't'), ...(obj(2, 'end info') as unknown as CaptureEndInfo) };
        break;
      default:
        // Unknown tags come from a newer writer of the same version: skip, don't fail.
        break;
    }
  }
}

/** Line 1: the header, checked. */
function readHeader(line: string, source: string): CaptureHeader {
  let header: CaptureHeader;
  try {
    header = JSON.parse(line);
  } catch {
    throw new MemscopeError('bad-capture', `${source}: line 1 is not a memscope capture header`);
  }
  if (!header || header.format !== CAPTURE_FORMAT) {
    const format = header && typeof header === 'object' && 'format' in header ? `its "format" is ${JSON.stringify(header.format)}` : 'no "format" field';
    throw new MemscopeError('bad-capture', `${source}: line 1 is not a memscope capture header (${format}, not "${CAPTURE_FORMAT}")`);
  }
  if (typeof header.version !== 'number' || header.version > CAPTURE_VERSION) {
    throw new MemscopeError('bad-capture', `${source}: capture format version ${header.version} is newer than this memscope reads (${CAPTURE_VERSION})`);
  }
  checkHeader(header as unknown as Record<string, unknown>, source);
  return header;
}

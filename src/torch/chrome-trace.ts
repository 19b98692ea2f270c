/**
 * Kineto (torch.profiler) chrome-trace reader for `[memory]` events.
 *
 * A real trace is tens of MB of JSON, almost all of it operator and kernel
 * events. Instead of building one huge string and one huge object graph with
 * JSON.parse, `ChromeTraceReader` takes text in chunks (as a gunzip stream
 * produces it), finds each element of `traceEvents` with a small structural
 * scanner, and JSON.parses one event at a time, keeping only what memory
 * analysis needs in growable typed columns. Peak memory is the columns plus
 * one chunk, not the file. The reader has no Node dependency (browsers feed
 * it from a fetch/File stream); `chrome-trace-node.ts` does the file I/O.
 *
 * Both memory-event layouts seen in the wild are accepted:
 * - Kineto ≥ 1.10: args {Addr, Bytes, Total Allocated, Total Reserved, Device Type, Device Id, Ev Idx}
 * - 2021: args {Device Type, Device Id, Bytes} — the reader sums the running totals.
 * Anything else is refused with a MemscopeError naming the keys it found.
 */
import { MemscopeError } from '../core/errors.js';
import { escapeControl } from '../render/escape.js';
import { deviceString, type DeviceMemoryTimeline, type MemoryTrace, type TraceOutOfMemory, type TraceSource } from './memory-trace.js';
import {
  attribute,
  buildDevice,
  buildOperators,
  compareDevices,
  DeviceColumns,
  Interner,
  OperatorColumns,
  type Layout,
} from './chrome-trace-columns.js';

/** CPU-side span categories that can enclose a `[memory]` event (GPU kernels run on streams, never around one). */
const OPERATOR_CATEGORIES = new Set(['cpu_op', 'Operator', 'user_annotation', 'python_function']);

/** A top-level value other than traceEvents larger than this is skipped rather than parsed. */
const MAX_TOP_LEVEL_VALUE = 1 << 20;
/** One trace event larger than this is refused (real events are < 64 KiB; this bounds memory). */
const MAX_EVENT_TEXT = 64 << 20;

const MODERN_KEYS = ['Bytes', 'Total Allocated', 'Total Reserved', 'Device Type', 'Device Id'];
const LEGACY_KEYS = ['Bytes', 'Device Type', 'Device Id'];

function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

// Scanner states.
const S_ROOT = 0; // before the top-level value
const S_KEY = 1; // in the root object, expecting a key or '}'
const S_KEY_STRING = 2; // inside a root key
const S_COLON = 3;
const S_VALUE = 4; // expecting a root value
const S_AFTER_VALUE = 5; // expecting ',' or '}'
const S_EVENTS = 6; // in traceEvents, expecting an event or ']'
const S_EVENTS_AFTER = 7; // after an event, expecting ',' or ']'
const S_CAPTURE = 8; // copying one value (an event or a root value)
const S_DONE = 9;

export interface ChromeTraceReaderOptions {
  /** Name used in error messages (a file path). */
  readonly source?: string;
  /** Characters of the file before the first text pushed (whitespace a caller dropped), for error positions. */
  readonly startOffset?: number;
}

/**
 * Push-style reader: `push(text)` any number of times, then `finish()`.
 * Text must be decoded already (use a streaming TextDecoder for bytes).
 */
export class ChromeTraceReader {
  private state = S_ROOT;
  private rootIsArray = false;
  private offset = 0; // characters consumed before the current chunk
  private key = '';
  private keyParts: string[] = [];
  private keyEscape = false;
  private readonly rootKeys: string[] = [];

  // Capture of one JSON value spanning chunks.
  private captureParts: string[] = [];
  private captureLength = 0;
  private captureDepth = 0;
  private captureInString = false;
  private captureEscape = false;
  private captureIsEvent = false;
  private captureStartOffset = 0;

  private sawTraceEvents = false;
  private eventCount = 0;
  private memoryEventCount = 0;
  private readonly eventsByCategory = new Map<string, number>();
  private layout: Layout | null = null;
  private layoutEvent = -1;
  private readonly devices = new Map<string, DeviceColumns>();
  private readonly ooms: (Omit<TraceOutOfMemory, 'operator'> & { thread: number })[] = [];
  private readonly threads = new Interner();
  private readonly deviceNames: Record<number, string> = {};

  private readonly ops = new OperatorColumns();

  constructor(private readonly options: ChromeTraceReaderOptions = {}) {
    this.offset = options.startOffset ?? 0;
  }

  private where(pos: number): string {
    return `${this.options.source ?? 'trace'}: at character ${pos}`;
  }

  private fail(code: string, pos: number, what: string): never {
    throw new MemscopeError(code, `${this.where(pos)}: ${what}`);
  }

  push(chunk: string): void {
    const n = chunk.length;
    let i = 0;
    let captureFrom = -1; // start of the capture within this chunk, if capturing
    if (this.state === S_CAPTURE) captureFrom = 0;
    while (i < n) {
      const state = this.state;
      if (state === S_CAPTURE) {
        // Hot loop: scan the structure of one value without building it.
        let depth = this.captureDepth;
        let inString = this.captureInString;
        let escape = this.captureEscape;
        let end = -1;
        for (; i < n; i++) {
          if (inString) {
            // Jump to the next quote; it closes the string unless an odd run of backslashes
            // precedes it (`escape` carries a backslash that ended the previous chunk).
            const q = chunk.indexOf('"', i);
            let k = (q < 0 ? n : q) - 1;
            while (k >= i && chunk.charCodeAt(k) === 92) k--;
            let run = q < 0 ? n - 1 - k : q - 1 - k;
            if (k < i && escape) run++;
            if (q < 0) {
              escape = run % 2 === 1;
              i = n;
              break;
            }
            escape = false;
            if (run % 2 === 0) inString = false;
            i = q;
            continue;
          }
          const c = chunk.charCodeAt(i);
          if (c === 34) inString = true;
          else if (c === 123 /* { */ || c === 91 /* [ */) depth++;
          else if (c === 125 /* } */ || c === 93 /* ] */) {
            if (depth === 0) {
              // A scalar root value ends at the container's closing bracket.
              end = i;
              break;
            }
            depth--;
            if (depth === 0) {
              end = i + 1;
              break;
            }
          } else if (depth === 0 && (c === 44 /* , */ || c === 32 || c === 10 || c === 13 || c === 9)) {
            end = i;
            break;
          }
        }
        this.captureDepth = depth;
        this.captureInString = inString;
        this.captureEscape = escape;
        if (end < 0) {
          this.appendCapture(chunk.slice(captureFrom), this.offset + n);
          break;
        }
        this.appendCapture(chunk.slice(captureFrom, end), this.offset + end);
        i = end;
        captureFrom = -1;
        this.completeCapture();
        continue;
      }
      const c = chunk.charCodeAt(i);
      if (state === S_KEY_STRING) {
        // Root keys are short; scan to the closing quote.
        let j = i;
        for (; j < n; j++) {
          const d = chunk.charCodeAt(j);
          if (this.keyEscape) this.keyEscape = false;
          else if (d === 92) this.keyEscape = true;
          else if (d === 34) break;
        }
        this.keyParts.push(chunk.slice(i, j));
        if (j === n) {
          i = n;
          break;
        }
        try {
          this.key = JSON.parse(`"${this.keyParts.join('')}"`) as string;
        } catch (err) {
          this.fail('bad-json', this.offset + j, `a top-level key is not a valid JSON string (${(err as Error).message})`);
        }
        this.keyParts = [];
        this.rootKeys.push(this.key);
        this.state = S_COLON;
        i = j + 1;
        continue;
      }
      if (c === 32 || c === 10 || c === 13 || c === 9) {
        i++;
        continue;
      }
      const pos = this.offset + i;
      switch (state) {
        case S_ROOT:
          if (c === 123) this.state = S_KEY;
          else if (c === 91) {
            // The Chrome trace format also allows a bare array of events.
            this.rootIsArray = true;
            this.sawTraceEvents = true;
            this.state = S_EVENTS;
          } else if (c === 0xfeff) {
            // A byte-order mark before the JSON.
          } else {
            this.fail(
              'not-a-trace',
              pos,
              `expected a Chrome trace (a JSON object with "traceEvents", or an array of events), found ${describeChar(chunk, i)}`,
            );
          }
          i++;
          break;
        case S_KEY:
          if (c === 34) {
            this.state = S_KEY_STRING;
            this.keyParts = [];
          } else if (c === 125) this.state = S_DONE;
          else this.fail('bad-json', pos, `expected a key in the top-level object, found ${describeChar(chunk, i)}`);
          i++;
          break;
        case S_COLON:
          if (c !== 58) this.fail('bad-json', pos, `expected ':' after key ${JSON.stringify(this.key)}, found ${describeChar(chunk, i)}`);
          this.state = S_VALUE;
          i++;
          break;
        case S_VALUE:
          if (this.key === 'traceEvents') {
            if (c !== 91) this.fail('not-a-trace', pos, `"traceEvents" is not an array (found ${describeChar(chunk, i)})`);
            this.sawTraceEvents = true;
            this.state = S_EVENTS;
            i++;
          } else {
            this.beginCapture(false, pos);
            captureFrom = i;
          }
          break;
        case S_AFTER_VALUE:
          if (c === 44) this.state = S_KEY;
          else if (c === 125) this.state = S_DONE;
          else this.fail('bad-json', pos, `expected ',' or '}' in the top-level object, found ${describeChar(chunk, i)}`);
          i++;
          break;
        case S_EVENTS:
          if (c === 123) {
            this.beginCapture(true, pos);
            captureFrom = i;
          } else if (c === 93) {
            this.state = this.rootIsArray ? S_DONE : S_AFTER_VALUE;
            i++;
          } else {
            this.fail('bad-json', pos, `expected a trace event object in "traceEvents", found ${describeChar(chunk, i)}`);
          }
          break;
        case S_EVENTS_AFTER:
          if (c === 44) this.state = S_EVENTS;
          else if (c === 93) this.state = this.rootIsArray ? S_DONE : S_AFTER_VALUE;
          else this.fail('bad-json', pos, `expected ',' or ']' after trace event ${this.eventCount - 1}, found ${describeChar(chunk, i)}`);
          i++;
          break;
        case S_DONE:
          this.fail('bad-json', pos, `unexpected ${describeChar(chunk, i)} after the end of the trace`);
      }
    }
    this.offset += n;
  }

  private beginCapture(isEvent: boolean, pos: number): void {
    this.state = S_CAPTURE;
    this.captureIsEvent = isEvent;
    this.captureParts = [];
    this.captureLength = 0;
    this.captureDepth = 0;
    this.captureInString = false;
    this.captureEscape = false;
    this.captureStartOffset = pos;
  }

  private appendCapture(text: string, pos: number): void {
    this.captureLength += text.length;
    // Oversized root values (say a huge "traceName") are skipped, not kept.
    const limit = this.captureIsEvent ? MAX_EVENT_TEXT : MAX_TOP_LEVEL_VALUE;
    if (this.captureLength > limit) {
      if (this.captureIsEvent) {
        this.fail('trace-too-large', pos, `trace event ${this.eventCount} is over ${limit} characters`);
      }
      this.captureParts = [];
      return;
    }
    this.captureParts.push(text);
  }

  private completeCapture(): void {
    const text = this.captureParts.length === 1 ? this.captureParts[0]! : this.captureParts.join('');
    this.captureParts = [];
    if (this.captureIsEvent && !mayBeNeeded(text)) {
      // Kernels, runtime calls and flow arrows are most of a trace and memscope needs
      // none of them: count their category and skip JSON.parse (the scanner has
      // already checked their brackets and strings balance).
      const cat = CATEGORY_PATTERN.exec(text)?.[1] ?? `ph:${PHASE_PATTERN.exec(text)?.[1] ?? '?'}`;
      this.eventsByCategory.set(cat, (this.eventsByCategory.get(cat) ?? 0) + 1);
      this.state = S_EVENTS_AFTER;
      this.eventCount++;
      return;
    }
    const skipped = !this.captureIsEvent && this.captureLength > MAX_TOP_LEVEL_VALUE;
    let value: unknown;
    if (!skipped) {
      try {
        value = JSON.parse(text);
      } catch (err) {
        const what = this.captureIsEvent ? `trace event ${this.eventCount}` : `top-level value ${JSON.stringify(this.key)}`;
        this.fail('bad-json', this.captureStartOffset, `${what} is not valid JSON (${(err as Error).message})`);
      }
    }
    if (this.captureIsEvent) {
      this.state = S_EVENTS_AFTER;
      this.onEvent(value, this.captureStartOffset);
      this.eventCount++;
    } else {
      this.state = S_AFTER_VALUE;
      if (!skipped) this.onRootValue(this.key, value);
    }
  }

  private onRootValue(key: string, value: unknown): void {
    if (key === 'deviceProperties' && Array.isArray(value)) {
      for (const d of value) {
        if (d && typeof d === 'object' && isFiniteNumber((d as { id?: unknown }).id)) {
          const name = (d as { name?: unknown }).name;
          if (typeof name === 'string') this.deviceNames[(d as { id: number }).id] = name;
        }
      }
    }
  }

  private onEvent(value: unknown, pos: number): void {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      this.fail('not-a-trace', pos, `trace event ${this.eventCount} is not an object`);
    }
    const e = value as { ph?: unknown; cat?: unknown; name?: unknown; ts?: unknown; dur?: unknown; pid?: unknown; tid?: unknown; args?: unknown };
    const cat = typeof e.cat === 'string' ? e.cat : typeof e.ph === 'string' ? `ph:${e.ph}` : '?';
    this.eventsByCategory.set(cat, (this.eventsByCategory.get(cat) ?? 0) + 1);
    if (e.name === '[memory]') {
      this.onMemoryEvent(e, pos);
      return;
    }
    if (e.name === '[OutOfMemory]') {
      this.onOutOfMemoryEvent(e);
      return;
    }
    if (e.ph === 'X' && typeof e.cat === 'string' && OPERATOR_CATEGORIES.has(e.cat) && isFiniteNumber(e.ts)) {
      const dur = isFiniteNumber(e.dur) ? e.dur : 0;
      this.ops.name.push(this.ops.names.id(typeof e.name === 'string' ? e.name : String(e.name)));
      this.ops.category.push(this.ops.categories.id(e.cat));
      this.ops.start.push(e.ts);
      this.ops.end.push(e.ts + dur);
      this.ops.thread.push(this.threads.id(`${String(e.pid)}/${String(e.tid)}`));
    }
  }

  private onMemoryEvent(
    e: { ts?: unknown; pid?: unknown; tid?: unknown; args?: unknown },
    pos: number,
  ): void {
    const index = this.eventCount;
    const args = e.args;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      this.fail('unknown-trace-layout', pos, `[memory] event ${index} has no args object`);
    }
    const a = args as Record<string, unknown>;
    const layout: Layout = 'Total Allocated' in a || 'Total Reserved' in a ? 'kineto' : 'kineto-2021';
    const needed = layout === 'kineto' ? MODERN_KEYS : LEGACY_KEYS;
    const missing = needed.filter((k) => !isFiniteNumber(a[k]));
    if (missing.length > 0 || !isFiniteNumber(e.ts)) {
      const keys = Object.keys(a);
      const found =
        keys
          .slice(0, 12)
          .map((k) => `${escapeControl(k.length > 40 ? `${k.slice(0, 40)}…` : k)}=${preview(a[k])}`)
          .join(', ') + (keys.length > 12 ? `, … (${keys.length} keys)` : '');
      this.fail(
        'unknown-trace-layout',
        pos,
        `[memory] event ${index} has an unknown layout: args {${found}}${isFiniteNumber(e.ts) ? '' : ', no numeric ts'}; ` +
          `expected {${MODERN_KEYS.join(', ')}} (Kineto ≥ 1.10) or {${LEGACY_KEYS.join(', ')}} (2021)` +
          (missing.length ? `; missing or non-numeric: ${missing.join(', ')}` : ''),
      );
    }
    if (this.layout === null) {
      this.layout = layout;
      this.layoutEvent = index;
    } else if (this.layout !== layout) {
      this.fail(
        'unknown-trace-layout',
        pos,
        `[memory] event ${index} uses the ${layout} layout but event ${this.layoutEvent} used ${this.layout}; a trace mixing both is not supported`,
      );
    }
    const deviceType = a['Device Type'] as number;
    const deviceId = a['Device Id'] as number;
    if (!Number.isInteger(deviceType) || deviceType < 0 || !Number.isInteger(deviceId) || deviceId < -1) {
      this.fail(
        'unknown-trace-layout',
        pos,
        `[memory] event ${index} has Device Type ${deviceType} and Device Id ${deviceId}; Kineto writes a device type ≥ 0 and a device index ≥ -1, both integers`,
      );
    }
    const device = deviceString(deviceType, deviceId);
    let cols = this.devices.get(device);
    if (!cols) {
      cols = new DeviceColumns(device);
      this.devices.set(device, cols);
    }
    cols.time.push(e.ts as number);
    cols.bytes.push(a['Bytes'] as number);
    cols.order.push(isFiniteNumber(a['Ev Idx']) ? a['Ev Idx'] : this.memoryEventCount);
    cols.thread.push(this.threads.id(`${String(e.pid)}/${String(e.tid)}`));
    if (layout === 'kineto') {
      cols.allocated.push(a['Total Allocated'] as number);
      cols.reserved.push(a['Total Reserved'] as number);
      cols.addr.push(isFiniteNumber(a['Addr']) ? a['Addr'] : NaN);
    }
    this.memoryEventCount++;
  }

  /**
   * An `[OutOfMemory]` event: Device Type, Device Id, Bytes, Total Allocated, Total Reserved as a
   * `[memory]` event has them. Kept whatever its args hold; a value it lacks is unknown.
   */
  private onOutOfMemoryEvent(e: { ts?: unknown; pid?: unknown; tid?: unknown; args?: unknown }): void {
    const a = (e.args !== null && typeof e.args === 'object' && !Array.isArray(e.args) ? e.args : {}) as Record<string, unknown>;
    const num = (k: string): number | null => (isFiniteNumber(a[k]) ? a[k] : null);
    const type = num('Device Type');
    const id = num('Device Id');
    const device = type !== null && id !== null && Number.isInteger(type) && type >= 0 && Number.isInteger(id) && id >= -1 ? deviceString(type, id) : 'unknown device';
    this.ooms.push({ device, time: isFiniteNumber(e.ts) ? e.ts : NaN, bytes: num('Bytes') ?? NaN, allocated: num('Total Allocated'), reserved: num('Total Reserved'), thread: this.threads.id(`${String(e.pid)}/${String(e.tid)}`) });
  }

  /** Completes the read: sorts each device's events by time and attributes them to operators. */
  finish(): MemoryTrace {
    if (this.state === S_CAPTURE || this.state === S_KEY_STRING) {
      this.fail('truncated-trace', this.offset, 'the trace ends in the middle of a value (truncated file?)');
    }
    if (!this.sawTraceEvents) {
      if (this.state === S_ROOT) this.fail('not-a-trace', this.offset, 'empty input: no JSON value');
      const keys = this.rootKeys.length ? this.rootKeys.map((k) => JSON.stringify(k)).join(', ') : 'none';
      this.fail('not-a-trace', this.offset, `not a Chrome trace: no "traceEvents" array (top-level keys: ${keys})`);
    }
    if (this.state !== S_DONE) {
      this.fail('truncated-trace', this.offset, 'the trace ends before its closing bracket (truncated file?)');
    }
    const operators = buildOperators(this.ops);
    const devices: DeviceMemoryTimeline[] = [];
    const names = [...this.devices.keys()].sort(compareDevices);
    for (const name of names) devices.push(buildDevice(this.devices.get(name)!, operators, this.layout));
    const source: TraceSource = this.layout ?? 'kineto';
    const ooms = [...this.ooms].sort((x, y) => x.time - y.time);
    const oomOperator = attribute(Float64Array.from(ooms, (o) => o.time), Int32Array.from(ooms, (o) => o.thread), operators);
    return {
      source,
      devices,
      operators: operators.spans,
      eventCount: this.eventCount,
      memoryEventCount: this.memoryEventCount,
      eventsByCategory: Object.fromEntries(this.eventsByCategory),
      deviceNames: this.deviceNames,
      outOfMemory: ooms.map(({ thread: _thread, ...o }, k) => {
        const op = oomOperator[k]!;
        return { ...o, operator: op >= 0 ? operators.spans.names[operators.spans.nameIndex[op]!]! : null };
      }),
    };
  }

}

const CATEGORY_PATTERN = /"cat"\s*:\s*"([^"\\]*)"/;
const PHASE_PATTERN = /"ph"\s*:\s*"([^"\\]*)"/;

/**
 * Whether an event's text could be a `[memory]` event or an operator span. A
 * literal search: an event that spells these names with \u escapes is
 * treated as one memscope does not need.
 */
function mayBeNeeded(text: string): boolean {
  if (text.includes('[memory]') || text.includes('[OutOfMemory]')) return true;
  for (const cat of OPERATOR_CATEGORIES) if (text.includes(cat)) return true;
  return false;
}

/** A short, safe rendering of an args value for an error message (never recurses). */
function preview(v: unknown): string {
  if (typeof v === 'string') return escapeControl(JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v));
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? `[array of ${v.length}]` : '{object}';
}

function describeChar(chunk: string, i: number): string {
  const snippet = chunk.slice(i, i + 24).replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(snippet);
}

/** Reads a whole trace held in memory (tests, browsers with small files). */
export function readChromeTrace(text: string, options: ChromeTraceReaderOptions = {}): MemoryTrace {
  const reader = new ChromeTraceReader(options);
  reader.push(text);
  return reader.finish();
}

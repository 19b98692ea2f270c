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
  /** Stack id (see `Capture.stacks`), 0 for none. */
  readonly stack: number;
  /** Optimizer steps completed when it was allocated: it belongs to step `step + 1`. */
  readonly step: number;
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

  const strings: string[] = [''];
  const stacks = new Map<number, string[]>();
  const allocs: CapturedAlloc[] = [];
  const byStorage = new Map<number, number>();
  const events: CapturedEvent[] = [];
  const modules = new Map<number, CapturedModule>();
  const steps: CapturedStep[] = [];
  const kernels = new Map<string, CapturedKernel>();
  let end: Capture['end'] = null;
  let truncated: Truncation | null = null;
  let unmatchedFrees = 0;
  const s = (id: unknown): string => (typeof id === 'number' && id > 0 ? strings[id] ?? '' : '');

  for (let i = 1; i < n; i++) {
    const line = lines[i];
    if (line === '') continue;
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
    switch (rec[0]) {
      case 's':
        strings[rec[1] as number] = String(rec[2]);
        break;
      case 'k':
        stacks.set(rec[1] as number, (rec[2] as number[]).map(s));
        break;
      case 'M':
        modules.set(rec[1] as number, { id: rec[1] as number, path: s(rec[2]), className: s(rec[3]), parentId: rec[4] as number, states: null });
        break;
      case 'a': {
        const index = allocs.length;
        const layer = s(rec[6]);
        const kernel = s(rec[8]);
        allocs.push({
          id: rec[2] as number,
          t: rec[1] as number,
          freeT: null,
          device: s(rec[3]),
          bytes: rec[4] as number,
          category: s(rec[5]),
          layer: layer || null,
          phase: s(rec[7]) || 'none',
          kernel: kernel || null,
          stack: rec[9] as number,
          step: rec[10] as number,
        });
        byStorage.set(rec[2] as number, index);
        events.push({ t: rec[1] as number, alloc: index, kind: 'alloc' });
        break;
      }
      case 'f': {
        const index = byStorage.get(rec[2] as number);
        if (index === undefined) {
          unmatchedFrees++;
          break;
        }
        byStorage.delete(rec[2] as number);
        allocs[index].freeT = rec[1] as number;
        events.push({ t: rec[1] as number, alloc: index, kind: 'free' });
        break;
      }
      case 'c': {
        const index = byStorage.get(rec[1] as number);
        if (index !== undefined) allocs[index].category = s(rec[2]);
        break;
      }
      case 'p':
        steps.push({ t: rec[1] as number, step: rec[2] as number, live: rec[3] as CapturedStep['live'] });
        break;
      case 'S': {
        const m = modules.get(rec[1] as number);
        if (m) m.states = rec[2] as ModuleStates;
        break;
      }
      case 'K': {
        const name = s(rec[1]);
        kernels.set(name, { name, calls: rec[2] as number, bytesAllocated: rec[3] as number, bytesRetained: rec[4] as number, peakAdded: rec[5] as number });
        break;
      }
      case 'e':
        end = { t: rec[1] as number, ...(rec[2] as CaptureEndInfo) };
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
    kernels: [...kernels.values()],
    stacks,
    end,
    truncated,
    unmatchedFrees,
  };
}

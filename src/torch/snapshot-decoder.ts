/**
 * Snapshot pickle → `MemorySnapshot`, two ways that share one assembler:
 *
 * - `readSnapshot(bytes)` / `readSnapshotPieces(readAt, size)` (fast path) run the pickle machine
 *   with the recognising builder (snapshot-builder.ts): trace entries, blocks, frames and frame
 *   lists go straight into interned tables and typed-array columns (snapshot-tables.ts) instead of
 *   a Map per dict. Anything it does not recognise stays a generic dict/list and goes through the
 *   same checks as the slow path, so recognition is an optimisation, not a different reader.
 * - `normaliseSnapshot(value)` takes a value from `readPickle` (Maps and arrays).
 *
 * Both end in `assemble()`, which walks segments / device_traces, checks every field's type and
 * names the path of anything wrong (`segments[3].blocks[7].size`).
 */
import { MemscopeError, isMemscopeError } from '../core/errors.js';
import { DEFAULT_PICKLE_LIMITS, type PickleLimits } from './pickle/builder.js';
import { PickleMachine, runPickle } from './pickle/machine.js';
import { readPickle, type PickleValue, type PlainValue } from './pickle/reader.js';
import { SnapshotBuilder } from './snapshot-builder.js';
import { FastPathBail, RawList, SnapshotTables, TRACE_KEYS } from './snapshot-tables.js';
import { Assembler, describe, shapeError } from './snapshot-assembler.js';
import { readWarnings } from './snapshot-warnings.js';
import { completeSkippedFrees, pendingBlockAddresses } from './skipped-frees.js';
import type { ExternalAnnotation, MemorySnapshot, StackTable } from './snapshot.js';
import { DEFAULT_DEVICE_TYPE, DEVICE_TYPE_KEY, isDeviceType } from './device-type.js';

const MODELLED_KEYS = new Set(['segments', 'device_traces', 'allocator_settings', 'external_annotations', DEVICE_TYPE_KEY]);

/** The model from the root a snapshot builder returned (also used by snapshot-stream.ts). */
export function assemble(root: unknown, t: SnapshotTables): MemorySnapshot {
  const a = new Assembler(t);
  let top = a.dict(root);
  if (!top) {
    // PyTorch 1.x `memory_snapshot()` returned the segment list alone.
    if (Array.isArray(root) || root instanceof RawList) top = new Map<unknown, unknown>([['segments', root]]);
    else throw shapeError('top level', `expected a dict with 'segments', found ${describe(root)}`);
  }
  if (!top.has('segments')) throw shapeError('top level', "no 'segments' key: not a PyTorch memory snapshot");
  const { segments, blocks } = a.segments(top.get('segments'));
  const frees = completeSkippedFrees(a.traces(top.get('device_traces')), t.actionNames, pendingBlockAddresses(segments, blocks, t.stateNames));
  const traces = frees.traces;
  const settings = top.get('allocator_settings');
  const allocatorSettings = settings === undefined || settings === null ? null : a.plain(settings, 'allocator_settings');
  if (allocatorSettings !== null && (typeof allocatorSettings !== 'object' || Array.isArray(allocatorSettings))) {
    throw shapeError('allocator_settings', 'expected a dict');
  }
  const annotations: ExternalAnnotation[] = [];
  const rawAnnotations = top.get('external_annotations');
  if (rawAnnotations !== undefined && rawAnnotations !== null) {
    a.list(rawAnnotations, 'external_annotations').forEach((x, i) => {
      const path = `external_annotations[${i}]`;
      const d = a.dict(x);
      if (!d) throw shapeError(path, `expected a dict, found ${describe(x)}`);
      annotations.push({
        stage: a.str(d.get('stage'), path, 'stage'),
        name: a.str(d.get('name'), path, 'name'),
        device: a.optInt(d.get('device'), -1, path, 'device'),
        timeUs: typeof d.get('time_us') === 'number' ? (d.get('time_us') as number) : a.int(d.get('time_us'), path, 'time_us'),
      });
    });
  }
  // memscope/webgpu's own key; a value that cannot name a device type costs only the name.
  const rawDeviceType = top.has(DEVICE_TYPE_KEY) ? top.get(DEVICE_TYPE_KEY) : DEFAULT_DEVICE_TYPE;
  const deviceType = isDeviceType(rawDeviceType) ? rawDeviceType : DEFAULT_DEVICE_TYPE;
  const extra: { [key: string]: PlainValue } = {};
  const unknownKeys: string[] = [];
  for (const [k, v] of top) {
    if (typeof k === 'string' && MODELLED_KEYS.has(k)) continue;
    unknownKeys.push(String(k));
    extra[String(k)] = a.plain(v, String(k));
  }
  const traceKeys = TRACE_KEYS.filter((_, bit) => t.traceKeyMask & (1 << bit)) as string[];
  traceKeys.push(...t.otherTraceKeys);
  const stacks: StackTable = {
    count: t.stackOffsets.length - 1,
    offsets: t.stackOffsets.finish(),
    frameIds: t.stackFrames.finish(),
  };
  const model = {
    segments,
    blocks,
    traces,
    frames: t.frames,
    stacks,
    strings: t.strings,
    stateNames: t.stateNames,
    actionNames: t.actionNames,
    allocatorSettings: allocatorSettings as { [key: string]: PlainValue } | null,
    externalAnnotations: annotations,
    deviceType,
    format: {
      hasAllocatorSettings: top.has('allocator_settings'),
      hasExternalAnnotations: top.has('external_annotations'),
      legacyBlockHistory: t.legacyHistory,
      traceKeys: traceKeys.sort(),
      unknownKeys,
    },
    extra,
    warnings: [] as string[],
  };
  model.warnings = [...readWarnings(model, t), ...frees.warnings];
  if (rawDeviceType !== deviceType) {
    const found = typeof rawDeviceType === 'string' ? JSON.stringify(rawDeviceType.slice(0, 40)) : describe(rawDeviceType);
    model.warnings.push(`${DEVICE_TYPE_KEY}: ${found} is not a device type (lower-case letters, digits, _): read as ${DEFAULT_DEVICE_TYPE}`);
  }
  return model;
}

export interface ReadSnapshotOptions {
  limits?: Partial<PickleLimits>;
  /** Called every ~0.5% of the file (at least every MiB) while reading; for progress bars. */
  onProgress?: (bytesRead: number, totalBytes: number) => void;
}

/** Normalises a snapshot already read with `readPickle`. */
export function normaliseSnapshot(value: PickleValue): MemorySnapshot {
  return assemble(value, new SnapshotTables());
}

/**
 * Reads a pickled PyTorch memory snapshot (`_dump_snapshot`) into memscope's model, fast and
 * without building a JavaScript object per block or event. Throws MemscopeError on bad input.
 */
export function readSnapshot(bytes: Uint8Array, options: ReadSnapshotOptions = {}): MemorySnapshot {
  if (!(bytes instanceof Uint8Array)) throw new MemscopeError('bad-argument', 'readSnapshot: expected a Uint8Array');
  const limits: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...options.limits };
  const tables = new SnapshotTables(Math.max(1024, Math.min(Math.floor(bytes.length / 100), 1 << 27)));
  try {
    const root = runPickle(bytes, new SnapshotBuilder(tables, Math.floor(bytes.length / 40), limits.maxContainerItems), limits, options.onProgress);
    return assemble(root, tables);
  } catch (e) {
    // Something the fast path does not model (e.g. a recognised dict modified later), or a fault
    // of its own (anything but a MemscopeError about the input): read generically.
    if (!fallsBack(e)) throw e;
    return normaliseSnapshot(readPickle(bytes, limits));
  }
}

/**
 * Whether an error from the fast path sends the read to the general path: FastPathBail, and any
 * exception that is not memscope's verdict on the input (the general path then gives the answer,
 * or the error, that the input deserves). A RangeError from an allocation past the heap stays
 * what it is: reading the file again would only meet it again.
 */
export function fallsBack(e: unknown): boolean {
  if (e instanceof FastPathBail) return true;
  if (isMemscopeError(e)) return false;
  return !(e instanceof RangeError && /allocation failed|Array buffer allocation/i.test(e.message));
}

/** A piece buffer twice as large, holding its first `have` bytes: for one opcode larger than the buffer (a huge string). */
export function grownPieceBuffer<B extends Uint8Array>(buf: B, have: number): B {
  const bigger = new Uint8Array(buf.length * 2);
  bigger.set(buf.subarray(0, have));
  return bigger as B;
}

/** Bytes of the file `readSnapshotPieces` holds at a time unless told otherwise. */
const DEFAULT_PIECE_BYTES = 8 << 20;

/** Reads up to `into.length` bytes of the file at `fileOffset` into `into`; returns how many. */
export type ReadAt = (into: Uint8Array, fileOffset: number) => number;

/** A ReadAt over bytes already in memory (tests that read a buffer in pieces). */
export function readerOf(bytes: Uint8Array): ReadAt {
  return (into, fileOffset) => {
    const n = Math.min(into.length, bytes.length - fileOffset);
    into.set(bytes.subarray(fileOffset, fileOffset + n));
    return n;
  };
}

/** As for `readSnapshot`, except that `onProgress` is called after each piece (8 MiB by default). */
export interface ReadSnapshotPiecesOptions extends ReadSnapshotOptions {
  /** Bytes of the file held at a time (default 8 MiB); grows for a single larger opcode. */
  pieceBytes?: number;
}

/**
 * `readSnapshot` for a file read in pieces through `readAt` (src/torch/snapshot-node.ts reads a
 * path this way): only one piece of the file is in memory at a time, so a 1 GB snapshot costs
 * 8 MiB for its bytes instead of 1 GB, and a reused buffer is cheaper to fill than a fresh one the
 * size of the file (no page faults). The machine keeps its state between pieces and stops before
 * an opcode a piece holds only part of; the rest of the piece is moved to the front of the buffer.
 * Same result and errors as `readSnapshot`.
 */
export function readSnapshotPieces(readAt: ReadAt, totalBytes: number, options: ReadSnapshotPiecesOptions = {}): MemorySnapshot {
  const limits: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...options.limits };
  const tables = new SnapshotTables(Math.max(1024, Math.min(Math.floor(totalBytes / 100), 1 << 27)));
  const builder = new SnapshotBuilder(tables, Math.floor(totalBytes / 40), limits.maxContainerItems);
  // Progress is reported here, after each piece, not by the machine inside its loop: a call out to
  // the caller's function there is a site the optimised loop has to be compiled for, and a new
  // callback (the CLI makes one per file) threw that code away twice per read.
  const machine = new PickleMachine(builder, limits);
  const onProgress = options.onProgress;
  let buf = new Uint8Array(Math.max(64, Math.min(options.pieceBytes ?? DEFAULT_PIECE_BYTES, totalBytes)));
  let have = 0; // valid bytes in buf
  let fileOffset = 0; // file offset of buf[0]
  try {
    let root: unknown;
    for (;;) {
      while (have < buf.length && fileOffset + have < totalBytes) {
        const n = readAt(buf.subarray(have), fileOffset + have);
        if (n <= 0) break;
        have += n;
      }
      const final = fileOffset + have >= totalBytes || have < buf.length;
      const run = machine.run(buf.subarray(0, have), fileOffset, final, totalBytes);
      if (run.done) {
        root = run.value;
        onProgress?.(totalBytes, totalBytes);
        break;
      }
      if (run.consumed === 0) {
        buf = grownPieceBuffer(buf, have);
        continue;
      }
      buf.copyWithin(0, run.consumed, have);
      have -= run.consumed;
      fileOffset += run.consumed;
      onProgress?.(fileOffset, totalBytes);
    }
    return assemble(root, tables);
  } catch (e) {
    if (!fallsBack(e)) throw e;
    // As readSnapshot: something the fast path does not model, or a fault of its own; read the
    // whole file generically.
    const all = new Uint8Array(totalBytes);
    let got = 0;
    while (got < totalBytes) {
      const n = readAt(all.subarray(got), got);
      if (n <= 0) break;
      got += n;
    }
    return normaliseSnapshot(readPickle(all.subarray(0, got), limits));
  }
}

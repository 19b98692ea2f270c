/**
 * memscope's model of a PyTorch CUDA memory snapshot (`torch.cuda.memory._snapshot()` /
 * `_dump_snapshot`), one shape for every PyTorch version. docs/SNAPSHOT_FORMAT.md maps each
 * field to the raw pickle keys.
 *
 * Segments are objects (there are thousands); blocks and trace events are columns of typed arrays
 * (there can be millions), and frames/stacks are interned, because snapshots repeat the same
 * Python/C++ stacks on almost every event. Use `blockAt`, `traceEventAt` and `stackFrames` for an
 * object view of one row. The readers that build it are in snapshot-decoder.ts (`readSnapshot`,
 * `normaliseSnapshot`); PyTorch's names (block states, trace actions, Frame) in pytorch-vocabulary.ts.
 */
import type { PlainValue } from './pickle/reader.js';
import { BLOCK_STATE_ALIASES, type Frame } from './pytorch-vocabulary.js';

/**
 * Interned stacks. Stack id 0 is the empty stack (no frames recorded, or `frames` absent).
 * Frames are innermost first, as PyTorch stores them.
 */
export interface StackTable {
  /** Number of distinct stacks (including the empty stack 0). */
  readonly count: number;
  /** stack id → frame ids: `frameIds.subarray(offsets[id], offsets[id + 1])`. */
  readonly offsets: Int32Array;
  readonly frameIds: Int32Array;
}

export interface Segment {
  /** Position in `snapshot.segments`. */
  readonly index: number;
  /** CUDA device index (`device`); -1 when the file does not say. */
  readonly device: number;
  readonly address: number;
  /** Bytes reserved from cudaMalloc (`total_size`). */
  readonly totalSize: number;
  /** Bytes in active_allocated blocks (`allocated_size`), as PyTorch computed it. */
  readonly allocatedSize: number;
  /** Bytes in active blocks incl. pending free (`active_size`). */
  readonly activeSize: number;
  /** Bytes the program asked for (`requested_size`); null in files that predate it. */
  readonly requestedSize: number | null;
  readonly stream: number;
  /** 'large' or 'small' pool (`segment_type`). */
  readonly segmentType: string;
  /** Memory pool id (`segment_pool_id`), e.g. [0, 0] for the default pool; null when absent. */
  readonly poolId: readonly [number, number] | null;
  readonly isExpandable: boolean;
  /** Stack that created the segment (`frames`, newer PyTorch); 0 when absent. */
  readonly stack: number;
  /** This segment's blocks are rows [firstBlock, firstBlock + blockCount) of `snapshot.blocks`. */
  readonly firstBlock: number;
  readonly blockCount: number;
}

/** Every block of every segment, in segment order. */
export interface BlockTable {
  readonly count: number;
  /** Index into `snapshot.segments`. */
  readonly segment: Int32Array;
  /** `address`; for PyTorch 2.0 blocks, which have none, the segment's address plus the sizes of the blocks before. */
  readonly address: Float64Array;
  readonly size: Float64Array;
  /**
   * Bytes requested (`requested_size`; legacy files: `history[0].real_size`); equals `size` when the
   * file records neither.
   */
  readonly requestedSize: Float64Array;
  /** Index into `snapshot.stateNames`. */
  readonly state: Uint8Array;
  /** Allocation stack (`frames`; legacy files: `history[0].frames`). */
  readonly stack: Int32Array;
}

/** One device's trace (`device_traces[device]`), oldest event first. */
export interface TraceTable {
  readonly device: number;
  readonly count: number;
  /** Index into `snapshot.actionNames`. */
  readonly action: Uint8Array;
  readonly addr: Float64Array;
  readonly size: Float64Array;
  readonly stream: Float64Array;
  /** Microseconds since the epoch (`time_us`); NaN when absent. */
  readonly timeUs: Float64Array;
  readonly stack: Int32Array;
  /** Index into `snapshot.strings` (`compile_context`), -1 when absent; null when no event has it. */
  readonly compileContext: Int32Array | null;
  /** Index into `snapshot.strings` (`user_metadata`), -1 when absent; null when no event has it. */
  readonly userMetadata: Int32Array | null;
  /** Free device bytes reported with an `oom` event (`device_free`), NaN elsewhere; null when none. */
  readonly deviceFree: Float64Array | null;
}

/** `external_annotations` entries (newest PyTorch): user-marked START/END ranges. */
export interface ExternalAnnotation {
  readonly stage: string;
  readonly name: string;
  readonly device: number;
  readonly timeUs: number;
}

/** Which optional parts the file had (tells PyTorch versions apart). */
export interface SnapshotFormat {
  readonly hasAllocatorSettings: boolean;
  readonly hasExternalAnnotations: boolean;
  /** Blocks carried `history` (PyTorch ≤ 2.0) instead of `frames`. */
  readonly legacyBlockHistory: boolean;
  /** Union of keys seen on trace entries, sorted. */
  readonly traceKeys: readonly string[];
  /** Top-level keys memscope does not model (their values are in `snapshot.extra`). */
  readonly unknownKeys: readonly string[];
}

export interface MemorySnapshot {
  readonly segments: readonly Segment[];
  readonly blocks: BlockTable;
  /** `traces[d]` is `device_traces[d]`; empty tables when history was not recorded. */
  readonly traces: readonly TraceTable[];
  readonly frames: readonly Frame[];
  readonly stacks: StackTable;
  /** Interned strings for compile_context / user_metadata. */
  readonly strings: readonly string[];
  /** Starts with KNOWN_BLOCK_STATES (pytorch-vocabulary.ts); unknown states found in the file follow. */
  readonly stateNames: readonly string[];
  /** Starts with KNOWN_TRACE_ACTIONS (pytorch-vocabulary.ts); unknown actions found in the file follow. */
  readonly actionNames: readonly string[];
  /** `allocator_settings` as plain JSON-ready data; null when absent (older PyTorch). */
  readonly allocatorSettings: { readonly [key: string]: PlainValue } | null;
  readonly externalAnnotations: readonly ExternalAnnotation[];
  /**
   * What the devices are (`device_type`, written by memscope/webgpu: 'webgpu'); 'cuda' for
   * PyTorch's files, which do not say (src/torch/device-type.ts).
   */
  readonly deviceType: string;
  readonly format: SnapshotFormat;
  /** Unknown top-level keys, as plain data. */
  readonly extra: { readonly [key: string]: PlainValue };
  /**
   * What the reader read other than exactly as written, one line each: fields PyTorch versions
   * leave out (no `time_us`, no block address), unknown line numbers, keys and values memscope
   * does not model. Empty for a file read exactly.
   */
  readonly warnings: readonly string[];
}

/** Object view of one block row. */
export interface BlockView {
  readonly index: number;
  readonly segment: number;
  readonly address: number;
  readonly size: number;
  readonly requestedSize: number;
  readonly state: string;
  readonly stack: number;
}

/** Object view of one trace event. */
export interface TraceEventView {
  readonly index: number;
  readonly action: string;
  readonly addr: number;
  readonly size: number;
  readonly stream: number;
  readonly timeUs: number | null;
  readonly stack: number;
  readonly compileContext: string | null;
  readonly userMetadata: string | null;
  readonly deviceFree: number | null;
}

/** A trace table's number columns: what `traceTableOf` picks rows from. */
export type TraceNumberColumns = Pick<TraceTable, 'addr' | 'size' | 'stream' | 'timeUs' | 'stack' | 'compileContext' | 'userMetadata' | 'deviceFree'>;

/**
 * A trace table of `count` rows made from `columns` by `f64` and `i32`, which pick the rows (a
 * view of a run, or a gather): every place that builds a TraceTable lists its columns here once.
 */
export function traceTableOf(
  device: number,
  count: number,
  action: Uint8Array,
  columns: TraceNumberColumns,
  f64: (c: Float64Array) => Float64Array,
  i32: (c: Int32Array) => Int32Array,
): TraceTable {
  return {
    device,
    count,
    action,
    addr: f64(columns.addr),
    size: f64(columns.size),
    stream: f64(columns.stream),
    timeUs: f64(columns.timeUs),
    stack: i32(columns.stack),
    compileContext: columns.compileContext ? i32(columns.compileContext) : null,
    userMetadata: columns.userMetadata ? i32(columns.userMetadata) : null,
    deviceFree: columns.deviceFree ? f64(columns.deviceFree) : null,
  };
}

export function stackFrameIds(snapshot: MemorySnapshot, stack: number): Int32Array {
  const { offsets, frameIds } = snapshot.stacks;
  return frameIds.subarray(offsets[stack]!, offsets[stack + 1]!);
}

/** Frames of a stack, innermost first. */
export function stackFrames(snapshot: MemorySnapshot, stack: number): Frame[] {
  return Array.from(stackFrameIds(snapshot, stack), (id) => snapshot.frames[id]!);
}

export function blockAt(snapshot: MemorySnapshot, index: number): BlockView {
  const b = snapshot.blocks;
  return {
    index,
    segment: b.segment[index]!,
    address: b.address[index]!,
    size: b.size[index]!,
    requestedSize: b.requestedSize[index]!,
    state: snapshot.stateNames[b.state[index]!]!,
    stack: b.stack[index]!,
  };
}

export function traceEventAt(snapshot: MemorySnapshot, trace: TraceTable, index: number): TraceEventView {
  const str = (col: Int32Array | null): string | null => {
    const id = col ? col[index]! : -1;
    return id < 0 ? null : snapshot.strings[id]!;
  };
  const t = trace.timeUs[index]!;
  const df = trace.deviceFree ? trace.deviceFree[index]! : NaN;
  return {
    index,
    action: snapshot.actionNames[trace.action[index]!]!,
    addr: trace.addr[index]!,
    size: trace.size[index]!,
    stream: trace.stream[index]!,
    timeUs: Number.isNaN(t) ? null : t,
    stack: trace.stack[index]!,
    compileContext: str(trace.compileContext),
    userMetadata: str(trace.userMetadata),
    deviceFree: Number.isNaN(df) ? null : df,
  };
}

/** Code of an action name in this snapshot, or -1 when no event has it. */
export function actionCode(snapshot: MemorySnapshot, action: string): number {
  return snapshot.actionNames.indexOf(action);
}

/** Code of a block state (or an alias of one) in this snapshot, or -1 when no block has it. */
export function stateCode(snapshot: MemorySnapshot, state: string): number {
  return snapshot.stateNames.indexOf(BLOCK_STATE_ALIASES[state] ?? state);
}

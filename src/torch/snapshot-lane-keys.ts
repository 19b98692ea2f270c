/**
 * The keys the snapshot lanes recognise, as bit numbers, and the sizes the general path charges
 * for shared nodes. The bits are `const enum` members checked against TRACE_KEYS / SEGMENT_KEYS at
 * typecheck time, so a lane compares each key with a constant.
 */
import { SEGMENT_KEYS, SEGMENT_KEY_BIT, TRACE_KEYS, TRACE_KEY_BIT } from './snapshot-tables.js';

/**
 * Bit of each trace entry key: its index in TRACE_KEYS. Literal members, so that the lanes' per-key
 * branches compare with constants; `TraceBitsMatchKeys` below fails typechecking if TRACE_KEYS
 * changes order.
 */
export const enum TraceBit {
  Action = 0,
  Addr = 1,
  Size = 2,
  Stream = 3,
  TimeUs = 4,
  Frames = 5,
  CompileContext = 6,
  UserMetadata = 7,
  DeviceFree = 8,
}
/** Bit of each segment key: its index in SEGMENT_KEYS (`SegmentBitsMatchKeys` checks the order). */
export const enum SegmentBit {
  Device = 0,
  Address = 1,
  TotalSize = 2,
  AllocatedSize = 3,
  ActiveSize = 4,
  RequestedSize = 5,
  Stream = 6,
  SegmentType = 7,
  SegmentPoolId = 8,
  IsExpandable = 9,
  Frames = 10,
  Blocks = 11,
}
type AssertTrue<T extends true> = T;
type TraceKeyAt<B extends TraceBit> = (typeof TRACE_KEYS)[B];
type SegmentKeyAt<B extends SegmentBit> = (typeof SEGMENT_KEYS)[B];
/** Fails typechecking when a TraceBit member is not its key's index in TRACE_KEYS. */
type TraceBitsMatchKeys = AssertTrue<
  [
    TraceKeyAt<TraceBit.Action>,
    TraceKeyAt<TraceBit.Addr>,
    TraceKeyAt<TraceBit.Size>,
    TraceKeyAt<TraceBit.Stream>,
    TraceKeyAt<TraceBit.TimeUs>,
    TraceKeyAt<TraceBit.Frames>,
    TraceKeyAt<TraceBit.CompileContext>,
    TraceKeyAt<TraceBit.UserMetadata>,
    TraceKeyAt<TraceBit.DeviceFree>,
  ] extends ['action', 'addr', 'size', 'stream', 'time_us', 'frames', 'compile_context', 'user_metadata', 'device_free']
    ? true
    : false
>;
/** Fails typechecking when a SegmentBit member is not its key's index in SEGMENT_KEYS. */
type SegmentBitsMatchKeys = AssertTrue<
  [
    SegmentKeyAt<SegmentBit.Device>,
    SegmentKeyAt<SegmentBit.Address>,
    SegmentKeyAt<SegmentBit.TotalSize>,
    SegmentKeyAt<SegmentBit.AllocatedSize>,
    SegmentKeyAt<SegmentBit.ActiveSize>,
    SegmentKeyAt<SegmentBit.RequestedSize>,
    SegmentKeyAt<SegmentBit.Stream>,
    SegmentKeyAt<SegmentBit.SegmentType>,
    SegmentKeyAt<SegmentBit.SegmentPoolId>,
    SegmentKeyAt<SegmentBit.IsExpandable>,
    SegmentKeyAt<SegmentBit.Frames>,
    SegmentKeyAt<SegmentBit.Blocks>,
  ] extends typeof SEGMENT_KEYS
    ? true
    : false
>;

/**
 * Bit of each key the lanes recognise: the trace entry keys (TraceBit), then the block keys that
 * are not also trace keys ('size' and 'frames' are shared), then the segment keys that are neither,
 * from Device on (SEGMENT_ONLY_KEYS order). Literal members, like TraceBit: an exported `const`
 * is read from its module's cell at every use in V8's optimised code, a const enum member is a
 * number in the lane's own code. `LaneBitsFollowTraceKeys` checks that Address follows the trace
 * keys.
 */
export const enum LaneBit {
  Action = TraceBit.Action,
  Size = TraceBit.Size,
  Frames = TraceBit.Frames,
  /** One past the last trace key bit. */
  TraceKeyCount = TraceBit.DeviceFree + 1,
  Address = TraceKeyCount,
  RequestedSize = TraceKeyCount + 1,
  State = TraceKeyCount + 2,
  Device = TraceKeyCount + 3,
}
/** Which keys a dict must, or may, have for a lane to take it, as masks of LaneBit / TraceBit. */
export const enum LaneMask {
  /** Keys every trace entry has: action, addr, size. */
  TraceRequired = (1 << TraceBit.Action) | (1 << TraceBit.Addr) | (1 << TraceBit.Size),
  Block = (1 << LaneBit.Address) | (1 << LaneBit.Size) | (1 << LaneBit.RequestedSize) | (1 << LaneBit.State) | (1 << LaneBit.Frames),
  BlockRequired = (1 << LaneBit.Address) | (1 << LaneBit.Size) | (1 << LaneBit.State),
}
/** Fails typechecking when TRACE_KEYS gains or loses a key and LaneBit.TraceKeyCount does not follow. */
type LaneBitsFollowTraceKeys = AssertTrue<`${(typeof TRACE_KEYS)['length']}` extends `${LaneBit.TraceKeyCount}` ? true : false>;

export const SEGMENT_ONLY_KEYS = ['device', 'total_size', 'allocated_size', 'active_size', 'segment_type', 'segment_pool_id', 'is_expandable', 'blocks'];
export const LANE_KEY_BIT = new Map<unknown, number>([
  ...TRACE_KEY_BIT,
  ['address', LaneBit.Address],
  ['requested_size', LaneBit.RequestedSize],
  ['state', LaneBit.State],
  ...SEGMENT_ONLY_KEYS.map((k, i): [string, number] => [k, LaneBit.Device + i]),
]);
/** Lane key bit → the key's bit in SEGMENT_KEYS, or -1 for a key segments do not have. */
export const SEGMENT_BIT_OF_LANE_BIT = new Int8Array(LaneBit.Device + SEGMENT_ONLY_KEYS.length).fill(-1);
for (const [key, bit] of SEGMENT_KEY_BIT) SEGMENT_BIT_OF_LANE_BIT[LANE_KEY_BIT.get(key)!] = bit;

/**
 * What the assembler spends per block it places (its row in the block columns, segment and index
 * columns): the cost charged when a file places a segment's blocks again by sharing it.
 */
export const BLOCK_ROW_BYTES = 40;
/** Charged per shared node placed again, whatever it holds. */
export const SHARED_NODE_BYTES = 16;

export function bitCount(x: number): number {
  x = x - ((x >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24);
}

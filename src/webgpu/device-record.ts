/**
 * One WebGPU device as memscope records it: its live resources, PyTorch's allocator statistics
 * over them and the trace ring of `recordMemoryHistory`. Each buffer, texture or query set is one
 * segment holding one block, at an address memscope makes up (WebGPU has no addresses); a
 * resource a framework's pool holds idle is a segment whose block is inactive — reserved, not
 * allocated — as a cached block is in PyTorch's caching allocator. WebGPU has no pools; a resource
 * counts in PyTorch's small pool when it is at most 1 MiB (kSmallSize) and in the large pool
 * otherwise, the split PyTorch makes by request size, so that the tables and `memscope summary`
 * (which sorts trace events by that size) agree.
 */
import { AGGREGATE, DeviceStats, LARGE_POOL, SMALL_POOL, flattenStats, nestedStats, type PoolFamily } from '../allocator/stats.js';
import type { TraceEntry } from '../allocator/caching-allocator.js';
import type { SnapshotSegment } from '../allocator/snapshot.js';
import { SMALL_SIZE, type Frame, type KnownTraceAction } from '../torch/pytorch-vocabulary.js';

export type ResourceKind = 'buffer' | 'texture' | 'querySet';

/** Who a resource belongs to: PyTorch's category names where they fit, plus the framework and operator. */
export interface Attribution {
  /** PyTorch MemTracker's 'Parameter', 'Buffer', 'Gradient', 'Activation', 'Temp', 'Optstate', 'Other', or a framework's own name. */
  category?: string;
  /** The library that made the resource ('tfjs-webgpu', 'onnxruntime-web', …). */
  framework?: string;
  /** The operator, kernel or call that made it. */
  operator?: string;
  /** The step (training step, generate step, session.run) it was made in. */
  step?: string;
}

/** How a resource stopped counting: its destroy(), its device's loss (device.destroy() included), or garbage collection. */
export type FreeReason = 'destroy' | 'device-lost' | 'gc';

export interface ResourceRecord {
  readonly id: number;
  readonly kind: ResourceKind;
  readonly device: number;
  readonly address: number;
  readonly bytes: number;
  readonly usage: number;
  readonly label: string;
  /** Format, size, mip levels and samples of a texture; type and count of a query set; '' for a buffer. */
  readonly shape: string;
  /** The creating JavaScript stack, innermost first ([] when stacks are off). */
  readonly frames: Frame[];
  readonly timeUs: number;
  attribution: Attribution;
  /** Held by the program (allocated) rather than idle in a framework's pool (reserved only). */
  inUse: boolean;
  freedBy?: FreeReason;
  freedTimeUs?: number;
}

export interface HistoryState {
  /** null: none; 'state': frames on live blocks only; 'all': also the trace ring. */
  enabled: 'state' | 'all' | null;
  maxEntries: number;
  /** Capture creating stacks. */
  stacks: boolean;
}

/** Distinct address ranges per device, so an address names its device as in PyTorch. */
const ADDRESS_BASE = 0x7e0000000000;
const DEVICE_SPAN = 2 ** 40;
/** Each resource's address is 512-aligned, like a CUDA block, and ranges never overlap. */
const ALIGN = 512;

/** The most GC-reclaimed resources kept with their details (the count and bytes are kept for all). */
export const MAX_GC_RECORDS = 1000;

export class DeviceRecord {
  readonly stats = new DeviceStats();
  readonly live = new Map<number, ResourceRecord>();
  readonly gcReclaimed: ResourceRecord[] = [];
  gcReclaimedCount = 0;
  gcReclaimedBytes = 0;
  private nextAddress: number;
  private ring: TraceEntry[] = [];
  private ringNext = 0;

  constructor(
    readonly index: number,
    readonly label: string,
    private readonly history: HistoryState,
  ) {
    this.nextAddress = ADDRESS_BASE + index * DEVICE_SPAN;
  }

  get name(): string {
    return `webgpu:${this.index}`;
  }

  takeAddress(bytes: number): number {
    const address = this.nextAddress;
    this.nextAddress += Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    return address;
  }

  private change(families: PoolFamily[], r: ResourceRecord, sign: 1 | -1, count: boolean): void {
    const pool = isSmall(r.bytes) ? SMALL_POOL : LARGE_POOL;
    const amount = count ? 1 : r.bytes;
    for (const f of families) {
      const pools = this.stats[f];
      if (sign > 0) {
        pools[AGGREGATE].increase(amount);
        pools[pool].increase(amount);
      } else {
        pools[AGGREGATE].decrease(amount);
        pools[pool].decrease(amount);
      }
    }
  }

  private setAllocated(r: ResourceRecord, on: boolean): void {
    const sign = on ? 1 : -1;
    this.change(['allocated_bytes', 'active_bytes', 'requested_bytes'], r, sign, false);
    this.change(['allocation', 'active'], r, sign, true);
  }

  add(r: ResourceRecord): void {
    this.live.set(r.id, r);
    this.stats.num_device_alloc++;
    this.change(['reserved_bytes'], r, 1, false);
    this.change(['segment'], r, 1, true);
    this.trace('segment_alloc', r, r.frames);
    if (r.inUse) {
      this.setAllocated(r, true);
      this.trace('alloc', r, r.frames);
    }
  }

  /** A framework's pool took the resource back (false) or handed it out again (true). */
  setInUse(r: ResourceRecord, inUse: boolean, frames: Frame[]): void {
    if (r.inUse === inUse || !this.live.has(r.id)) return;
    r.inUse = inUse;
    this.setAllocated(r, inUse);
    if (inUse) this.trace('alloc', r, frames);
    else {
      this.trace('free_requested', r, frames);
      this.trace('free_completed', r, frames);
    }
  }

  remove(r: ResourceRecord, reason: FreeReason, timeUs: number, frames: Frame[]): void {
    if (!this.live.delete(r.id)) return;
    if (r.inUse) {
      this.setAllocated(r, false);
      this.trace('free_requested', r, frames, timeUs);
      this.trace('free_completed', r, frames, timeUs);
    }
    this.change(['reserved_bytes'], r, -1, false);
    this.change(['segment'], r, -1, true);
    this.stats.num_device_free++;
    this.trace('segment_free', r, frames, timeUs);
    r.freedBy = reason;
    r.freedTimeUs = timeUs;
    if (reason === 'gc') {
      this.gcReclaimedCount++;
      this.gcReclaimedBytes += r.bytes;
      if (this.gcReclaimed.length >= MAX_GC_RECORDS) this.gcReclaimed.shift();
      this.gcReclaimed.push(r);
    }
  }

  private trace(action: KnownTraceAction, r: ResourceRecord, frames: Frame[], timeUs = nowUs()): void {
    if (this.history.enabled !== 'all' || this.history.maxEntries <= 0) return;
    const entry: TraceEntry = { action, addr: r.address, size: r.bytes, stream: 0, time_us: timeUs, frames: this.history.stacks ? frames : [] };
    if (this.ring.length < this.history.maxEntries) this.ring.push(entry);
    else {
      this.ring[this.ringNext] = entry;
      this.ringNext = (this.ringNext + 1) % this.history.maxEntries;
    }
  }

  /** The trace ring oldest first. */
  traceEntries(): TraceEntry[] {
    return [...this.ring.slice(this.ringNext), ...this.ring.slice(0, this.ringNext)];
  }

  /** Drops the ring (history turned off or resized), as PyTorch's record_history does. */
  clearTrace(): void {
    this.ring = [];
    this.ringNext = 0;
  }

  memoryStats(): Record<string, number> {
    return flattenStats(nestedStats(this.stats, Infinity));
  }

  /** One segment per live resource, in creation order. */
  segments(): SnapshotSegment[] {
    const out: SnapshotSegment[] = [];
    for (const r of this.live.values()) {
      const frames = this.history.enabled !== null && this.history.stacks ? withResourceFrames(r) : withResourceFrames({ ...r, frames: [] });
      const held = r.inUse ? r.bytes : 0;
      out.push({
        device: this.index,
        address: r.address,
        total_size: r.bytes,
        allocated_size: held,
        active_size: held,
        requested_size: held,
        stream: 0,
        segment_type: isSmall(r.bytes) ? 'small' : 'large',
        segment_pool_id: [0, 0],
        is_expandable: false,
        frames,
        blocks: [{ address: r.address, size: r.bytes, requested_size: r.bytes, state: r.inUse ? 'active_allocated' : 'inactive', frames }],
      });
    }
    return out;
  }
}

const isSmall = (bytes: number): boolean => bytes <= SMALL_SIZE;

const perf = (globalThis as { performance?: { timeOrigin?: number; now(): number } }).performance;
/** The page's time origin, read once: `performance.timeOrigin` is a call into the browser each time. */
const TIME_ORIGIN = perf && typeof perf.timeOrigin === 'number' ? perf.timeOrigin : undefined;

/** Microseconds since the epoch, as PyTorch's time_us. */
export function nowUs(): number {
  const ms = TIME_ORIGIN !== undefined ? TIME_ORIGIN + perf!.now() : Date.now();
  return Math.round(ms * 1000);
}

/** The file name of the frames memscope adds: the resource itself (innermost) and its attribution (outermost). */
export const WEBGPU_FRAME_FILE = '<webgpu>';

/**
 * A resource's frames for a snapshot: the creating stack between an innermost frame naming the
 * resource (kind, label, shape) and an outermost one naming its attribution, so that flame graphs
 * and `memscope summary` group by category and framework and show what each block is.
 */
export function withResourceFrames(r: Pick<ResourceRecord, 'kind' | 'label' | 'shape' | 'frames' | 'attribution'>): Frame[] {
  const what = [r.kind, r.label ? JSON.stringify(r.label) : '', r.shape].filter(Boolean).join(' ');
  const frames: Frame[] = [{ name: what, filename: WEBGPU_FRAME_FILE, line: 0 }, ...r.frames];
  const a = r.attribution;
  const who = [a.category, a.framework, a.operator, a.step === undefined ? '' : `step ${a.step}`].filter(Boolean).join(' · ');
  if (who) frames.push({ name: who, filename: WEBGPU_FRAME_FILE, line: 0 });
  return frames;
}

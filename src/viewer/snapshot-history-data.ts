/**
 * The part of a report page's data that the Allocator State History, the Active Cached Segment
 * Timeline, the allocator settings and the OOM marks read (PyTorch snapshots): each device's
 * final segments and live blocks, and its whole trace as columns. The page replays the trace
 * backwards from the final state to show the state at any event, as PyTorch's
 * torch/utils/viz/MemoryViz.js does. Built by src/viewer/snapshot-history.ts; types only here, so
 * report-data.ts can name them without importing the builder.
 */

/** A JSON value as the snapshot's `allocator_settings` holds it. */
export type SettingValue = null | boolean | number | string | SettingValue[] | { [key: string]: SettingValue };

/** One segment of the final state (`segments[]` of the snapshot). */
export interface HistorySegment {
  readonly address: number;
  /** Bytes reserved (`total_size`). */
  readonly size: number;
  readonly stream: number;
  /** `segment_pool_id`; null in files that predate it. [0, 0] is the default pool. */
  readonly pool: [number, number] | null;
  readonly expandable: boolean;
  /** `segment_type`: 'large' or 'small'. */
  readonly kind: string;
}

/** One device's final state and trace. */
export interface ReportHistoryDevice {
  /** "cuda:N", "webgpu:N". */
  readonly device: string;
  /** Index into `memory.devices` of the same device: its `eventDt` times these events. */
  readonly memory: number;
  /** Final segments, by address. */
  readonly segments: HistorySegment[];
  /**
   * Final active blocks (active_allocated or active_pending_free), by address: block size,
   * requested size, 1 for a block whose free waits on a stream (active_pending_free), stack
   * (index into `stacks`, -1 none).
   */
  readonly blocks: { address: number[]; size: number[]; requested: number[]; pending: number[]; stack: number[] };
  /**
   * Every trace event, oldest first: action (index into `ReportHistory.actions`), address (index
   * into `addresses`; -1 for events without one, such as `oom`), size, stream (index into
   * `streams`), stack (index into `stacks`, -1 none).
   */
  readonly events: { action: number[]; addr: number[]; size: number[]; stream: number[]; stack: number[] };
  readonly addresses: number[];
  readonly streams: number[];
  /**
   * `oom` events: their index, the bytes requested, and the device's free bytes then (`device_free`;
   * -1 when absent). The requested size repeats `events.size`, so the chart marks OOMs on its first
   * frame without the event columns.
   */
  readonly ooms: { event: number[]; requested: number[]; deviceFree: number[] };
}

export interface ReportHistory {
  /** Trace action names (PyTorch's: alloc, free_requested, free_completed, segment_alloc, …). */
  readonly actions: string[];
  readonly devices: ReportHistoryDevice[];
  /** `allocator_settings` as recorded (PyTorch ≥ 2.1); null when the snapshot has none. */
  readonly allocatorSettings: { [key: string]: SettingValue } | null;
}

/**
 * PyTorch's CUDA caching allocator vocabulary, defined once for every folder that speaks it: the
 * stack frame a snapshot records, the block states and trace actions its snapshots write, and the
 * pool sizes of c10/cuda/CUDACachingAllocator.cpp. The snapshot reader (torch/) and the allocator
 * model (allocator/) both import it; it imports nothing, so it sits below both.
 */

/** One stack frame (Python or C++), as PyTorch records it in a snapshot's `frames` lists. */
export interface Frame {
  readonly name: string;
  readonly filename: string;
  /** -1 when unknown (CPython's -1, written by PyTorch as 2^64 - 1). */
  readonly line: number;
}

/**
 * Block states PyTorch writes, in the order memscope's state codes use.
 * `active_pending_free` is what torch/csrc/cuda/memory_snapshot.cpp writes and `_memory_viz.py`
 * reads: freed by the program but still in use by another stream, so active yet not allocated.
 */
export const KNOWN_BLOCK_STATES = ['active_allocated', 'active_pending_free', 'inactive'] as const;

export type BlockState = (typeof KNOWN_BLOCK_STATES)[number];

/**
 * Other spellings of known states, mapped when read. torch/cuda/memory.py's docstring calls the
 * pending state `active_awaiting_free`; no PyTorch writer uses that name, but hand-written or
 * third-party snapshots that follow the docstring should still count as pending.
 */
export const BLOCK_STATE_ALIASES: Readonly<Record<string, BlockState>> = {
  active_awaiting_free: 'active_pending_free',
};

/**
 * Trace actions PyTorch writes in `device_traces`, in the order memscope's action codes use.
 * `annotate` (PyTorch main, `torch.cuda.memory._annotate_memory`) attaches `user_metadata` to a
 * live allocation at `addr`: it allocates and frees nothing.
 */
export const KNOWN_TRACE_ACTIONS = [
  'alloc',
  'free_requested',
  'free_completed',
  'segment_alloc',
  'segment_free',
  'segment_map',
  'segment_unmap',
  'snapshot',
  'oom',
  'annotate',
] as const;

export type KnownTraceAction = (typeof KNOWN_TRACE_ACTIONS)[number];

// Pool sizes of the caching allocator (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize and friends).

/** Every block is a multiple of this (and no smaller). */
export const MIN_BLOCK_SIZE = 512;
/** Requests up to this size use the small pool (kSmallSize). */
export const SMALL_SIZE = 1 << 20;
/** Segment size of the small pool (kSmallBuffer). */
export const SMALL_BUFFER = 2 << 20;
/** Segment size for large requests below MIN_LARGE_ALLOC, "packed" segments (kLargeBuffer). */
export const LARGE_BUFFER = 20 << 20;
/** Requests from this size on get a segment of their own, rounded to ROUND_LARGE (kMinLargeAlloc). */
export const MIN_LARGE_ALLOC = 10 << 20;
/** Rounding of segments for large requests (kRoundLarge). */
export const ROUND_LARGE = 2 << 20;

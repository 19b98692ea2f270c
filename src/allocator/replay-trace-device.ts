import type { DeviceBackend } from './device.js';
import { TRACE_DEVICE_MEMORY } from './replay-start-state.js';

/**
 * The device replay runs the allocator model on: it answers cudaMalloc and page mapping from the
 * trace (the address cudaMalloc returned or the first segment_map landed at, and whether it failed
 * first, which the trace shows as segment_free / segment_unmap events before the allocation).
 * Which block, whether to split and what to release stay the model's decisions.
 */
export class TraceDevice implements DeviceBackend {
  readonly totalMemory = TRACE_DEVICE_MEMORY;
  /** segment_alloc events of the trace that the current allocation may consume. */
  expectedAllocs: { addr: number; size: number }[] = [];
  /** Where the current allocation's first segment_map lands (the base of a fresh expandable segment). */
  expectedMapAt: number | null = null;
  /** cudaMalloc / page mapping fails until the model has released this many segments or page runs (the trace's count). */
  failUntilFrees = 0;
  modelFrees = 0;
  failAll = false;
  /** Addresses for loadState, taken in order. */
  preload: number[] = [];
  private preloadNext = 0;
  private synthetic = 2 ** 52;

  freeMemory(): number {
    return 0;
  }
  private refuses(): boolean {
    return this.failAll || this.modelFrees < this.failUntilFrees;
  }
  malloc(size: number): number | null {
    if (this.preloadNext < this.preload.length) return this.preload[this.preloadNext++];
    if (this.refuses()) return null;
    const i = this.expectedAllocs.findIndex((a) => a.size === size);
    if (i >= 0) return this.expectedAllocs.splice(i, 1)[0].addr;
    const addr = this.synthetic;
    this.synthetic += Math.ceil(size / (2 << 20)) * (2 << 20);
    return addr;
  }
  free(): void {}
  reserveAddressSpace(size: number): number {
    if (this.expectedMapAt !== null) {
      const at = this.expectedMapAt;
      this.expectedMapAt = null;
      return at;
    }
    const addr = this.synthetic;
    this.synthetic += size;
    return addr;
  }
  mapPage(): boolean {
    return !this.refuses();
  }
  unmapPage(): void {}
}

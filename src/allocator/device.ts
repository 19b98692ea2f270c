import { MemscopeError } from '../core/errors.js';

/**
 * What the caching allocator asks of the device: cudaMalloc/cudaFree for
 * ordinary segments, and for expandable segments a virtual address range plus
 * physical pages mapped into it (cuMemAddressReserve / cuMemCreate+cuMemMap).
 * The simulated device hands out addresses; replay supplies the addresses
 * PyTorch actually got.
 */
export interface DeviceBackend {
  /** Total device memory (cudaMemGetInfo's total). */
  readonly totalMemory: number;
  /** Free device memory now (cudaMemGetInfo's free). */
  freeMemory(): number;
  /** cudaMalloc: an address for `size` bytes, or null when the device cannot give them. */
  malloc(size: number): number | null;
  free(address: number, size: number): void;
  /** Reserves `size` bytes of address space (no physical memory) for an expandable segment. */
  reserveAddressSpace(size: number): number;
  /** Physical memory for one page of an expandable segment; false when the device is full. */
  mapPage(address: number, size: number): boolean;
  unmapPage(address: number, size: number): void;
}

export const GiB = 1024 ** 3;
/** Default capacity of a simulated device (an 80 GiB A100/H100). */
export const DEFAULT_CAPACITY = 80 * GiB;
/** Simulated addresses start here (a typical CUDA VA on Linux) and are 2 MiB aligned like cudaMalloc's. */
const BASE_ADDRESS = 0x7f0000000000;
const ALIGN = 2 << 20;

/** A device with a fixed capacity and a bump address space (addresses are never reused, which keeps them unique in traces). */
export class SimulatedDevice implements DeviceBackend {
  private used = 0;
  private nextAddress: number;

  constructor(
    readonly totalMemory: number = DEFAULT_CAPACITY,
    baseAddress: number = BASE_ADDRESS,
  ) {
    if (!(Number.isSafeInteger(totalMemory) && totalMemory > 0)) {
      throw new MemscopeError('bad-argument', `device capacity must be a positive integer number of bytes, got ${totalMemory}`);
    }
    this.nextAddress = baseAddress;
  }

  freeMemory(): number {
    return this.totalMemory - this.used;
  }

  malloc(size: number): number | null {
    if (this.used + size > this.totalMemory) return null;
    this.used += size;
    return this.take(size);
  }

  free(_address: number, size: number): void {
    this.used -= size;
  }

  reserveAddressSpace(size: number): number {
    return this.take(size);
  }

  mapPage(_address: number, size: number): boolean {
    if (this.used + size > this.totalMemory) return false;
    this.used += size;
    return true;
  }

  unmapPage(_address: number, size: number): void {
    this.used -= size;
  }

  private take(size: number): number {
    const address = this.nextAddress;
    this.nextAddress += Math.ceil(size / ALIGN) * ALIGN;
    return address;
  }
}

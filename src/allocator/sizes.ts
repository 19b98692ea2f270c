/**
 * The size rules of PyTorch's CUDA caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp): how a request is rounded, which pool it
 * lands in, and how big a fresh segment is. Pure functions; the settings that
 * change them come in as arguments. The pool sizes themselves are PyTorch's vocabulary
 * (src/torch/pytorch-vocabulary.ts), re-exported here beside the rules that use them.
 */
import { LARGE_BUFFER, MIN_BLOCK_SIZE, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER, SMALL_SIZE } from '../torch/pytorch-vocabulary.js';

export { LARGE_BUFFER, MIN_BLOCK_SIZE, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER, SMALL_SIZE } from '../torch/pytorch-vocabulary.js';

/** roundup_power2_divisions has one entry per power-of-two interval from 1 MiB to 32 GiB. */
export const POWER2_INTERVALS = 16;

const MiB = 1 << 20;

/** floor(log2(n)) for a positive integer that may exceed 2^32. */
export function log2Floor(n: number): number {
  let k = 0;
  let v = n;
  while (v >= 2 ** 31) {
    v = Math.floor(v / 2 ** 16);
    k += 16;
  }
  return k + (31 - Math.clz32(v));
}

export function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && 2 ** log2Floor(n) === n;
}

/** Which entry of roundup_power2_divisions applies to a request of `size` bytes. */
export function power2IntervalIndex(size: number): number {
  const index = log2Floor(Math.max(size, 1)) - log2Floor(MiB);
  return Math.min(Math.max(index, 0), POWER2_INTERVALS - 1);
}

/**
 * Rounds up to the next of `divisions` equal steps between the surrounding
 * powers of two (e.g. 1200 MiB with 4 divisions → 1280 MiB).
 */
export function roundupPower2NextDivision(size: number, divisions: number): number {
  if (isPowerOfTwo(size)) return size;
  const floor = 2 ** log2Floor(size);
  const step = floor / 2 ** log2Floor(divisions);
  if (step < 1) return floor * 2;
  const rounded = Math.floor(size / step) * step;
  return rounded === size ? size : rounded + step;
}

/** The block size a request of `size` bytes needs. */
export function roundSize(size: number, divisionsFor: (size: number) => number = () => 0): number {
  if (size < MIN_BLOCK_SIZE) return MIN_BLOCK_SIZE;
  const divisions = divisionsFor(size);
  if (divisions > 1 && size > MIN_BLOCK_SIZE * divisions) return roundupPower2NextDivision(size, divisions);
  return MIN_BLOCK_SIZE * Math.ceil(size / MIN_BLOCK_SIZE);
}

/** True when a block of this (rounded) size belongs to the small pool. */
export function isSmallSize(roundedSize: number): boolean {
  return roundedSize <= SMALL_SIZE;
}

/** Size of the segment cudaMalloc'd for a block of `roundedSize` that found no cached block. */
export function segmentSizeFor(roundedSize: number): number {
  if (roundedSize <= SMALL_SIZE) return SMALL_BUFFER;
  if (roundedSize < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return ROUND_LARGE * Math.ceil(roundedSize / ROUND_LARGE);
}

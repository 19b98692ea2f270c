/**
 * What the pickle machine (machine.ts) asks of whoever builds its values: the `PickleBuilder` that
 * makes containers, the optional `FastLane` that reads whole dicts straight from the
 * opcode bytes, and the `PickleLimits` every read is held to. Tuples are frozen arrays.
 */
import type { PickleMemo } from './memo.js';

export interface PickleLimits {
  /** Largest VM stack plus open MARKs (how deeply containers can be under construction). */
  maxDepth: number;
  /** Most items in one list / dict / set / tuple. */
  maxContainerItems: number;
  /** Most memo entries (BINPUT / MEMOIZE). */
  maxMemoEntries: number;
  /** Estimated bytes of decoded values (strings, bytes, container slots) before giving up. */
  maxBytes: number;
}

export const DEFAULT_PICKLE_LIMITS: Readonly<PickleLimits> = Object.freeze({
  maxDepth: 100_000,
  maxContainerItems: 200_000_000,
  maxMemoEntries: 500_000_000,
  maxBytes: 8 * 1024 ** 3,
});

/** Makes the containers; the machine only handles the stack, memo and scalars. */
export interface PickleBuilder {
  newDict(): unknown;
  /** stack[start..end) holds key, value, key, value… to store in `target` (which must be a dict). */
  setItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void;
  newList(): unknown;
  /** stack[start..end) holds items to append to `target` (which must be a list). */
  appendItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void;
  /** Called once on the value STOP returns. */
  finish(value: unknown): unknown;
  /** Told the memo and every memo put, a builder may release finished values from the memo
   * (`PickleMemo.release`, to let them be collected) and rebuild them in `materialize` on a later GET. */
  attachMemo?(memo: PickleMemo): void;
  /** `replaced`: the slot held a value already (a re-PUT; CPython never writes one, a hostile file can). */
  onMemoize?(value: unknown, index: number, replaced: boolean): void;
  /** The value for a GET of memo entry `index`, which the builder released under `id`. */
  materialize?(index: number, id: number): unknown;
  /**
   * Bytes the builder's last `materialize`, `setItems` or `appendItems` call committed beyond what
   * the machine counts for the opcode: a shared value placed again costs what materialising it
   * again costs (a segment referenced a million times is a million segments' blocks to the
   * reader). The machine takes it from the `maxBytes` budget and sets it back to 0.
   */
  pendingCharge?: number;
  /** Expected number of memo entries: the memo's index is allocated at that size up front. */
  readonly memoCapacityHint?: number;
  /**
   * Optional fast lane, tried at each EMPTY_DICT at offset `at`: a builder that recognises the
   * whole dict's opcodes (through its SETITEMS) may decode them itself and return the offset after
   * them, having set `lane.value` (pushed for it), advanced `lane.memoCount` by its memo puts and
   * set `lane.charge` to what the general path would have taken from the `maxBytes` budget. It
   * returns -1, touching nothing, when anything is unexpected or when the general path could have
   * hit a limit inside (opcodes longer than `lane.maxSpan` bytes, or a charge above
   * `lane.budget`); the machine then proceeds normally, so limit errors and their offsets are the
   * same with or without lanes. It must never throw for bad input.
   */
  fastDict?(bytes: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number;
}

/** In/out state of `PickleBuilder.fastDict` (one object per read, reused). */
export interface FastLane {
  memoCount: number;
  maxMemoEntries: number;
  /** Longest run of opcodes (bytes) a lane may take: no stack depth, MARK or container-size limit can be reached within it. */
  maxSpan: number;
  /** How many more MARKs may be open at once (limits.maxDepth less those open): a lane nesting more gives up. */
  markRoom: number;
  /** What is left of the `maxBytes` budget; a lane needing more gives up. */
  budget: number;
  /** Out: the budget the lane's opcodes used, exactly as the general path counts it. */
  charge: number;
  value: unknown;
}

/** Tuples are read as frozen arrays (`Object.isFrozen`), so the writer can write them back as tuples. */
export function makeTuple<T>(items: T[]): readonly T[] {
  return Object.freeze(items);
}

export function isTuple(value: unknown): boolean {
  return Array.isArray(value) && Object.isFrozen(value);
}

/**
 * Generic safe unpickler: any plain-data pickle (protocols 2–5) → JavaScript values.
 *
 * Python → JavaScript mapping (`PickleValue`):
 *   None → null · bool → boolean · int → number when a safe integer, else bigint · float → number
 *   str → string · bytes / bytearray → Uint8Array · list → Array · tuple → frozen Array (`isTuple`)
 *   dict → Map (keys keep their Python types and order; tuple keys compare by identity)
 *   set → Set · frozenset → frozen Set
 * Dicts are Maps, not objects, because pickled dicts may have int/tuple keys and keys like
 * `__proto__`; use `dictGet` / `toPlain` for convenient access. Shared references (the memo) stay
 * shared, and a self-referencing pickle produces a cyclic value, as in Python.
 */
import { MemscopeError } from '../../core/errors.js';
import { DEFAULT_PICKLE_LIMITS, isTuple, type PickleBuilder, type PickleLimits } from './builder.js';
import { pickleError } from './errors.js';
import { runPickle } from './machine.js';

export { DEFAULT_PICKLE_LIMITS, isTuple, makeTuple, type PickleLimits } from './builder.js';

export type PickleScalar = null | boolean | number | bigint | string | Uint8Array;
export type PickleValue =
  | PickleScalar
  | PickleValue[]
  | readonly PickleValue[]
  | Map<PickleValue, PickleValue>
  | Set<PickleValue>;
export type PickleDict = Map<PickleValue, PickleValue>;

function isUnhashable(key: unknown): boolean {
  return key instanceof Map || (key instanceof Set && !Object.isFrozen(key)) || (Array.isArray(key) && !isTuple(key));
}

/**
 * A container placed again (through the memo) from this many values on is charged what
 * materialising it again costs: below it (frame dicts, short lists, trace entries and blocks)
 * sharing is free.
 */
const CHARGE_SHARED_FROM = 64;
/** Bytes charged per value of a shared container placed again (a slot and a small object). */
const SHARED_VALUE_BYTES = 8;

class GenericBuilder implements PickleBuilder {
  /** See PickleBuilder.pendingCharge. */
  pendingCharge = 0;
  /** Values each container stands for, its own included, each shared value counted at every place. */
  private readonly weights = new WeakMap<object, number>();
  /** Heavy containers placed once: placing one again is charged. */
  private readonly placedOnce = new WeakSet<object>();

  constructor(private readonly maxItems: number) {}

  /**
   * Adds the weights of values placed in `target`, charging heavy ones placed before. A list
   * stored under a `frames` key is a stack: every reader of snapshots interns it (the fast path's
   * lanes by memo slot, `normaliseSnapshot` by identity), so placing it again costs one stack id,
   * never its frames. It weighs 1 and is never charged, on this path as on the fast path
   * (SnapshotBuilder), so on the sharing PyTorch writes both take the same bytes from `maxBytes`.
   */
  private place(target: object, stack: unknown[], start: number, end: number, step: number): void {
    let total = 0;
    for (let i = start; i < end; i += step) {
      const v = stack[i];
      if (typeof v !== 'object' || v === null || (step === 2 && stack[i - 1] === 'frames' && Array.isArray(v))) {
        total++;
        continue;
      }
      const w = this.weights.get(v) ?? 1;
      total += w;
      if (w >= CHARGE_SHARED_FROM) {
        if (this.placedOnce.has(v)) this.pendingCharge += w * SHARED_VALUE_BYTES;
        else this.placedOnce.add(v);
      }
    }
    this.weights.set(target, (this.weights.get(target) ?? 1) + total);
  }

  newDict(): unknown {
    return new Map();
  }
  setItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!(target instanceof Map)) throw pickleError('pickle-corrupt', at, 'SETITEMS target is not a dict');
    for (let i = start; i < end; i += 2) {
      const key = stack[i];
      if (isUnhashable(key)) throw pickleError('pickle-corrupt', at, 'dict key is an unhashable list, dict or set');
      target.set(key, stack[i + 1]);
    }
    if (target.size > this.maxItems) throw pickleError('pickle-limit', at, `dict with more than ${this.maxItems} items`);
    this.place(target, stack, start + 1, end, 2);
  }
  newList(): unknown {
    return [];
  }
  appendItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!Array.isArray(target) || Object.isFrozen(target)) {
      throw pickleError('pickle-corrupt', at, 'APPEND target is not a list');
    }
    for (let i = start; i < end; i++) target.push(stack[i]);
    if (target.length > this.maxItems) throw pickleError('pickle-limit', at, `list with more than ${this.maxItems} items`);
    this.place(target, stack, start, end, 1);
  }
  finish(value: unknown): unknown {
    return value;
  }
}

/**
 * Reads one pickle. Throws `MemscopeError` (codes `pickle-truncated`, `pickle-corrupt`,
 * `pickle-unsafe`, `pickle-unsupported`, `pickle-limit`) naming the opcode and byte offset.
 */
export function readPickle(bytes: Uint8Array, limits: Partial<PickleLimits> = {}): PickleValue {
  const full: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...limits };
  if (!(bytes instanceof Uint8Array)) throw new MemscopeError('bad-argument', 'readPickle: expected a Uint8Array');
  return runPickle(bytes, new GenericBuilder(full.maxContainerItems), full) as PickleValue;
}

/** `dict[key]` for a string key, undefined when absent or when `dict` is not a dict. */
export function dictGet(dict: PickleValue | undefined, key: string): PickleValue | undefined {
  return dict instanceof Map ? dict.get(key) : undefined;
}

export type PlainValue = null | boolean | number | string | PlainValue[] | { [key: string]: PlainValue };

/**
 * Most values `toPlain` may stand for, counting a shared value once per place it appears (what
 * writing the copy out as JSON materialises): a 224-byte pickle can share one list 2^24 times.
 */
export const DEFAULT_PLAIN_VALUES = 1 << 26;

/**
 * JSON-compatible copy: Maps → null-prototype objects (non-string keys stringified), tuples and
 * sets → arrays, bigint → decimal string, bytes → array of numbers. A value shared in the input is
 * shared in the copy (copied once), so the copy costs memory in proportion to the input; its
 * expanded size (each shared value counted at every place) must not pass `maxValues`. Cycles and
 * nesting deeper than `maxDepth` throw MemscopeError, as does an expanded size past `maxValues`.
 */
export function toPlain(value: PickleValue, maxDepth = 1000, maxValues = DEFAULT_PLAIN_VALUES): PlainValue {
  const active = new Set<unknown>();
  /** Each container copied so far: its copy and how many values it expands to. */
  const done = new Map<unknown, { copy: PlainValue; expanded: number }>();
  const tooMany = (): MemscopeError =>
    new MemscopeError('pickle-limit', `pickle value expands to more than ${maxValues} values (a shared value counts at every place it appears)`);
  let lastExpanded = 0;
  const walk = (v: PickleValue, depth: number): PlainValue => {
    lastExpanded = 1;
    if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') return v;
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Uint8Array) {
      lastExpanded = 1 + v.length;
      if (lastExpanded > maxValues) throw tooMany();
      return Array.from(v);
    }
    const seen = done.get(v);
    if (seen !== undefined) {
      lastExpanded = seen.expanded;
      return seen.copy;
    }
    if (depth > maxDepth) throw new MemscopeError('pickle-limit', `pickle value nested deeper than ${maxDepth}`);
    if (active.has(v)) throw new MemscopeError('pickle-cycle', 'pickle value contains a reference cycle');
    active.add(v);
    let out: PlainValue;
    let expanded = 1;
    if (v instanceof Map) {
      const o: { [key: string]: PlainValue } = Object.create(null);
      for (const [k, x] of v) {
        o[typeof k === 'string' ? k : String(k)] = walk(x, depth + 1);
        expanded += lastExpanded;
        if (expanded > maxValues) throw tooMany();
      }
      out = o;
    } else {
      const a: PlainValue[] = [];
      for (const x of v as Iterable<PickleValue>) {
        a.push(walk(x, depth + 1));
        expanded += lastExpanded;
        if (expanded > maxValues) throw tooMany();
      }
      out = a;
    }
    active.delete(v);
    done.set(v, { copy: out, expanded });
    lastExpanded = expanded;
    return out;
  };
  return walk(value, 0);
}

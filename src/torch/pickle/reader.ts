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
import {
  DEFAULT_PICKLE_LIMITS,
  isTuple,
  pickleError,
  runPickle,
  type PickleBuilder,
  type PickleLimits,
} from './machine.js';

export { DEFAULT_PICKLE_LIMITS, isTuple, makeTuple, type PickleLimits } from './machine.js';

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

class GenericBuilder implements PickleBuilder {
  constructor(private readonly maxItems: number) {}
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
 * JSON-compatible copy: Maps → null-prototype objects (non-string keys stringified), tuples and
 * sets → arrays, bigint → decimal string, bytes → array of numbers. Cycles and nesting deeper than
 * `maxDepth` throw MemscopeError.
 */
export function toPlain(value: PickleValue, maxDepth = 1000): PlainValue {
  const active = new Set<unknown>();
  const walk = (v: PickleValue, depth: number): PlainValue => {
    if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') return v;
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Uint8Array) return Array.from(v);
    if (depth > maxDepth) throw new MemscopeError('pickle-limit', `pickle value nested deeper than ${maxDepth}`);
    if (active.has(v)) throw new MemscopeError('pickle-cycle', 'pickle value contains a reference cycle');
    active.add(v);
    let out: PlainValue;
    if (v instanceof Map) {
      const o: { [key: string]: PlainValue } = Object.create(null);
      for (const [k, x] of v) o[typeof k === 'string' ? k : String(k)] = walk(x, depth + 1);
      out = o;
    } else {
      out = [];
      for (const x of v as Iterable<PickleValue>) out.push(walk(x, depth + 1));
    }
    active.delete(v);
    return out;
  };
  return walk(value, 0);
}

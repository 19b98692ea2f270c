/**
 * Pickle writer, protocol 4, for memscope's own snapshots (`dumpSnapshot`) and round trips.
 *
 * A snapshot-shaped value (dicts, lists, 2-tuples, str, int, float, False) is written with exactly
 * the opcodes PyTorch's own `_dump_snapshot` files use — PROTO FRAME MARK STOP EMPTY_DICT
 * EMPTY_LIST TUPLE2 SETITEMS APPEND APPENDS BININT BININT1 BININT2 LONG1 BINFLOAT NEWFALSE
 * SHORT_BINUNICODE BINUNICODE MEMOIZE BINGET LONG_BINGET — so MemoryViz.js (pytorch.org/memory_viz)
 * and `_memory_viz.py` read the result. Other values need standard opcodes beyond that list
 * (NONE, NEWTRUE, TUPLE/TUPLE1/TUPLE3/EMPTY_TUPLE, SHORT_BINBYTES/BINBYTES, LONG4, EMPTY_SET /
 * ADDITEMS, FROZENSET), which Python's `pickle.load` reads.
 *
 * JavaScript → Python: null → None · boolean → bool · integer number → int · other number → float
 * (`pyFloat(x)` forces a float, e.g. 0.0) · bigint → int · string → str · Uint8Array → bytes ·
 * Array → list · frozen Array (`makeTuple`) → tuple · Map → dict · plain object → dict with str keys
 * (properties whose value is undefined are skipped, as JSON does) · Set → set · frozen Set → frozenset.
 * The same object written twice is written once and referenced (memo), so shared frames stay
 * shared and cycles through lists/dicts round-trip. Equal strings are written once.
 */
import { MemscopeError } from '../../core/errors.js';
import { isTuple } from './builder.js';
import { Op } from './opcodes.js';

/** A number to write as a Python float even when it is integral (e.g. `pyFloat(0)` → 0.0). */
export class PyFloat {
  constructor(readonly value: number) {}
}

export function pyFloat(value: number): PyFloat {
  return new PyFloat(value);
}

export interface WritePickleOptions {
  /** Deepest nesting written before refusing (the writer recurses). Default 1000. */
  maxDepth?: number;
}

const FRAME_TARGET = 64 * 1024;
const BATCH = 1000;
const encoder = new TextEncoder();

class ByteSink {
  buf = new Uint8Array(1 << 16);
  view = new DataView(this.buf.buffer);
  len = 0;
  reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  byte(b: number): void {
    this.reserve(1);
    this.buf[this.len++] = b;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.len, v, true);
    this.len += 4;
  }
}

function longBytes(v: bigint): Uint8Array {
  // Minimal little-endian two's complement, as Python's encode_long.
  if (v === 0n) return new Uint8Array(0);
  const out: number[] = [];
  let x = v;
  for (;;) {
    out.push(Number(x & 0xffn));
    x >>= 8n;
    const signBit = (out[out.length - 1]! & 0x80) !== 0;
    if ((x === 0n && !signBit) || (x === -1n && signBit)) break;
  }
  return Uint8Array.from(out);
}

/** Serialises `value` as a protocol 4 pickle. Throws MemscopeError for values Python can't hold. */
export function writePickle(value: unknown, options: WritePickleOptions = {}): Uint8Array {
  const maxDepth = options.maxDepth ?? 1000;
  const out = new ByteSink();
  const memo = new Map<unknown, number>();
  let frameStart = -1;

  const startFrame = (): void => {
    out.byte(Op.FRAME);
    frameStart = out.len;
    out.reserve(8);
    out.len += 8;
  };
  /** Closes the current frame once it is big enough; only called between opcodes. */
  const maybeCommitFrame = (force = false): void => {
    const size = out.len - frameStart - 8;
    if (size >= FRAME_TARGET || force) {
      out.view.setUint32(frameStart, size, true);
      out.view.setUint32(frameStart + 4, 0, true);
      if (!force) startFrame();
    }
  };
  const memoize = (obj: unknown): void => {
    memo.set(obj, memo.size);
    out.byte(Op.MEMOIZE);
  };
  const get = (index: number): void => {
    if (index < 256) {
      out.reserve(2);
      out.buf[out.len++] = Op.BINGET;
      out.buf[out.len++] = index;
    } else {
      out.byte(Op.LONG_BINGET);
      out.u32(index);
    }
  };

  const writeInt = (v: number): void => {
    if (v >= 0 && v < 256) {
      out.reserve(2);
      out.buf[out.len++] = Op.BININT1;
      out.buf[out.len++] = v;
    } else if (v >= 0 && v < 65536) {
      out.reserve(3);
      out.buf[out.len++] = Op.BININT2;
      out.buf[out.len++] = v & 0xff;
      out.buf[out.len++] = v >>> 8;
    } else if (v >= -0x80000000 && v <= 0x7fffffff) {
      out.reserve(5);
      out.buf[out.len++] = Op.BININT;
      out.view.setInt32(out.len, v, true);
      out.len += 4;
    } else {
      writeLong(BigInt(v));
    }
  };
  const writeLong = (v: bigint): void => {
    if (v >= -0x80000000n && v <= 0x7fffffffn) return writeInt(Number(v));
    const bytes = longBytes(v);
    if (bytes.length < 256) {
      out.reserve(2 + bytes.length);
      out.buf[out.len++] = Op.LONG1;
      out.buf[out.len++] = bytes.length;
    } else {
      out.byte(Op.LONG4);
      out.u32(bytes.length);
      out.reserve(bytes.length);
    }
    out.buf.set(bytes, out.len);
    out.len += bytes.length;
  };
  const writeFloat = (v: number): void => {
    out.reserve(9);
    out.buf[out.len++] = Op.BINFLOAT;
    out.view.setFloat64(out.len, v, false);
    out.len += 8;
  };
  const writeString = (s: string): void => {
    const seen = memo.get(s);
    if (seen !== undefined) return get(seen);
    out.reserve(s.length * 3 + 5);
    // Write the bytes after a 5-byte header slot, then pick the short or long header.
    const bodyAt = out.len + 5;
    const n = encoder.encodeInto(s, out.buf.subarray(bodyAt)).written;
    if (n < 256) {
      out.buf[out.len] = Op.SHORT_BINUNICODE;
      out.buf[out.len + 1] = n;
      out.buf.copyWithin(out.len + 2, bodyAt, bodyAt + n);
      out.len += 2 + n;
    } else {
      out.buf[out.len] = Op.BINUNICODE;
      out.view.setUint32(out.len + 1, n, true);
      out.len += 5 + n;
    }
    memoize(s);
  };
  const writeBytes = (b: Uint8Array): void => {
    if (b.length < 256) {
      out.reserve(2 + b.length);
      out.buf[out.len++] = Op.SHORT_BINBYTES;
      out.buf[out.len++] = b.length;
    } else {
      out.byte(Op.BINBYTES);
      out.u32(b.length);
      out.reserve(b.length);
    }
    out.buf.set(b, out.len);
    out.len += b.length;
    memoize(b);
  };

  const fail = (path: string, what: string): never => {
    throw new MemscopeError('pickle-write', `writePickle: ${what} at ${path || 'the top level'}`);
  };

  const write = (v: unknown, path: string, depth: number): void => {
    maybeCommitFrame();
    switch (typeof v) {
      case 'number':
        if (Number.isInteger(v) && !Object.is(v, -0)) {
          if (Number.isSafeInteger(v)) writeInt(v);
          else writeLong(BigInt(v));
        } else writeFloat(v);
        return;
      case 'bigint':
        return writeLong(v);
      case 'string':
        return writeString(v);
      case 'boolean':
        out.byte(v ? Op.NEWTRUE : Op.NEWFALSE);
        return;
      case 'undefined':
        return fail(path, 'undefined has no Python equivalent');
      case 'object':
        break;
      default:
        return fail(path, `cannot write a ${typeof v}`);
    }
    if (v === null) {
      out.byte(Op.NONE);
      return;
    }
    if (v instanceof PyFloat) return writeFloat(v.value);
    const seen = memo.get(v);
    if (seen !== undefined) return get(seen);
    if (depth >= maxDepth) fail(path, `nesting deeper than ${maxDepth}`);
    if (v instanceof Uint8Array) return writeBytes(v);
    if (Array.isArray(v)) {
      if (isTuple(v)) {
        if (v.length > 3) out.byte(Op.MARK);
        v.forEach((x, i) => write(x, `${path}[${i}]`, depth + 1));
        const op = [Op.EMPTY_TUPLE, Op.TUPLE1, Op.TUPLE2, Op.TUPLE3][v.length] ?? Op.TUPLE;
        if (memo.has(v)) fail(path, 'a tuple that contains itself');
        out.byte(op);
        memoize(v);
        return;
      }
      out.byte(Op.EMPTY_LIST);
      memoize(v);
      for (let i = 0; i < v.length; i += BATCH) {
        const end = Math.min(v.length, i + BATCH);
        if (end - i > 1) out.byte(Op.MARK);
        for (let j = i; j < end; j++) write(v[j], `${path}[${j}]`, depth + 1);
        out.byte(end - i > 1 ? Op.APPENDS : Op.APPEND);
      }
      return;
    }
    if (v instanceof Set) {
      const items = [...v];
      if (Object.isFrozen(v)) {
        // frozenset: one MARK … FROZENSET, memoized after its items like a tuple.
        out.byte(Op.MARK);
        items.forEach((x, j) => write(x, `${path}{${j}}`, depth + 1));
        out.byte(Op.FROZENSET);
        memoize(v);
        return;
      }
      out.byte(Op.EMPTY_SET);
      memoize(v);
      for (let i = 0; i < items.length; i += BATCH) {
        out.byte(Op.MARK);
        for (let j = i; j < Math.min(items.length, i + BATCH); j++) write(items[j], `${path}{${j}}`, depth + 1);
        out.byte(Op.ADDITEMS);
      }
      return;
    }
    let entries: [unknown, unknown][];
    if (v instanceof Map) entries = [...v];
    else if (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null) {
      entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    } else {
      const name = (v as object).constructor?.name ?? 'object';
      return fail(path, `cannot write a ${name} (write plain objects, Maps, arrays, Uint8Array)`);
    }
    out.byte(Op.EMPTY_DICT);
    memoize(v);
    for (let i = 0; i < entries.length; i += BATCH) {
      out.byte(Op.MARK);
      for (let j = i; j < Math.min(entries.length, i + BATCH); j++) {
        const [k, x] = entries[j]!;
        write(k, `${path}{key ${j}}`, depth + 1);
        write(x, typeof k === 'string' ? `${path}.${k}` : `${path}[${String(k)}]`, depth + 1);
      }
      out.byte(Op.SETITEMS);
    }
  };

  out.reserve(2);
  out.buf[out.len++] = Op.PROTO;
  out.buf[out.len++] = 4;
  startFrame();
  write(value, '', 0);
  out.byte(Op.STOP);
  maybeCommitFrame(true);
  return out.buf.slice(0, out.len);
}

/**
 * The pickle virtual machine: walks the opcode stream of protocols 2–5 and builds values,
 * never executing anything. Containers are made by a `PickleBuilder`, so the same loop serves
 * the generic reader (Map / Array values) and the columnar snapshot decoder (which recognises
 * trace entries, blocks and frames while they are being built and stores them in typed arrays).
 *
 * Safety: GLOBAL / STACK_GLOBAL resolve only a handful of pure data constructors that protocol 2
 * uses for bytes and sets (`_codecs.encode`, `builtins.set`, `frozenset`, `bytearray`), implemented
 * here in TypeScript; every other global, REDUCE of anything else, BUILD, INST, OBJ, NEWOBJ(_EX),
 * PERSID, BINPERSID and EXT* are refused with a `MemscopeError` naming the opcode and offset.
 * Every loop iteration advances the read position, so no input can make it spin; sizes are checked
 * against `PickleLimits` before anything is allocated.
 */
import { MemscopeError } from '../../core/errors.js';
import { Op, opcodeName } from './opcodes.js';

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
  /** Told the memo array and every memo put, a builder may replace finished values in the memo by
   * `memoSentinel` (to let them be collected) and rebuild them in `materialize` on a later GET. */
  attachMemo?(memo: unknown[]): void;
  onMemoize?(value: unknown, index: number): void;
  readonly memoSentinel?: unknown;
  materialize?(index: number): unknown;
}

const NEVER = Symbol('never stored');

/** Tuples are read as frozen arrays (`Object.isFrozen`), so the writer can write them back as tuples. */
export function makeTuple<T>(items: T[]): readonly T[] {
  return Object.freeze(items);
}

export function isTuple(value: unknown): boolean {
  return Array.isArray(value) && Object.isFrozen(value);
}

/** `pickle: <message> at offset <at>[; <hint>]` */
export function pickleError(code: string, at: number, message: string, hint?: string): MemscopeError {
  return new MemscopeError(code, `pickle: ${message} at offset ${at}${hint ? `; ${hint}` : ''}`);
}

const SAFE_GLOBALS = new Set([
  '_codecs.encode',
  'builtins.set',
  'builtins.frozenset',
  'builtins.bytearray',
  '__builtin__.set',
  '__builtin__.frozenset',
  '__builtin__.bytearray',
]);

/** A resolved allow-listed global (pure data constructor). Only REDUCE can consume it. */
class SafeGlobal {
  constructor(readonly qualifiedName: string) {}
}

const textDecoder = new TextDecoder('utf-8');

/** UTF-8 → string; short ASCII runs (most snapshot strings) skip TextDecoder's call overhead. */
export function decodeUtf8(bytes: Uint8Array, start: number, end: number): string {
  const n = end - start;
  if (n <= 64) {
    let ascii = true;
    for (let i = start; i < end; i++) {
      if (bytes[i]! >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[]);
  }
  return textDecoder.decode(bytes.subarray(start, end));
}

function decodeLatin1(bytes: Uint8Array, start: number, end: number): string {
  let s = '';
  for (let i = start; i < end; i++) s += String.fromCharCode(bytes[i]!);
  return s;
}

/**
 * Little-endian two's-complement integer of n bytes (LONG1 / LONG4): a number when it is a safe
 * integer, otherwise a BigInt.
 */
export function decodeLong(b: Uint8Array, s: number, n: number): number | bigint {
  if (n === 0) return 0;
  const negative = (b[s + n - 1]! & 0x80) !== 0;
  if (n <= 6) {
    let v = 0;
    for (let i = n - 1; i >= 0; i--) v = v * 256 + b[s + i]!;
    return negative ? v - 2 ** (8 * n) : v;
  }
  if (n <= 8 && !negative) {
    const lo = (b[s]! | (b[s + 1]! << 8) | (b[s + 2]! << 16) | (b[s + 3]! << 24)) >>> 0;
    let hi = 0;
    for (let i = n - 1; i >= 4; i--) hi = hi * 256 + b[s + i]!;
    if (hi < 0x200000) return hi * 0x100000000 + lo;
  }
  let hex = '';
  for (let i = n - 1; i >= 0; i--) hex += (b[s + i]! < 16 ? '0' : '') + b[s + i]!.toString(16);
  let big = BigInt('0x' + hex);
  if (negative) big -= 1n << BigInt(8 * n);
  if (big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(big);
  return big;
}

function applySafeGlobal(fn: SafeGlobal, args: unknown, at: number): unknown {
  if (!Array.isArray(args)) throw pickleError('pickle-corrupt', at, `REDUCE arguments for ${fn.qualifiedName} are not a tuple`);
  const name = fn.qualifiedName.slice(fn.qualifiedName.indexOf('.') + 1);
  if (name === 'encode') {
    // Protocol 2 writes bytes as _codecs.encode(latin1_text, 'latin1').
    const [text, encoding] = args as unknown[];
    if (typeof text !== 'string' || (encoding !== 'latin1' && encoding !== 'latin-1')) {
      throw pickleError('pickle-unsafe', at, `refusing _codecs.encode with arguments other than (str, 'latin1')`);
    }
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c > 255) throw pickleError('pickle-corrupt', at, `_codecs.encode: character ${c} is not latin1`);
      out[i] = c;
    }
    return out;
  }
  const source = args.length === 0 ? [] : args[0];
  if (name === 'bytearray') {
    if (source instanceof Uint8Array) return new Uint8Array(source);
    if (Array.isArray(source) && source.every((x) => typeof x === 'number' && x >= 0 && x < 256 && Number.isInteger(x))) {
      return Uint8Array.from(source as number[]);
    }
    // bytearray(str, 'latin-1') is how protocol 2 writes bytearray.
    if (typeof source === 'string' && (args[1] === 'latin-1' || args[1] === 'latin1')) {
      return Uint8Array.from(source, (ch) => ch.charCodeAt(0) & 0xff);
    }
    throw pickleError('pickle-unsafe', at, `refusing bytearray(...) with unexpected arguments`);
  }
  // set / frozenset of a list
  if (!Array.isArray(source) && !(source instanceof Set)) {
    throw pickleError('pickle-unsafe', at, `refusing ${fn.qualifiedName}(...) of a non-list`);
  }
  const set = new Set(source as Iterable<unknown>);
  return name === 'frozenset' ? Object.freeze(set) : set;
}

/** Runs the machine over `bytes` and returns what STOP returns (after `builder.finish`). */
export function runPickle(
  bytes: Uint8Array,
  builder: PickleBuilder,
  limits: PickleLimits,
  onProgress?: (bytesRead: number, totalBytes: number) => void,
): unknown {
  // A plain Uint8Array view: Node Buffers' subarray is slower.
  const b = Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const len = b.length;
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  // The VM stack: a preallocated array and a pointer (setting an array's length is a runtime call).
  const stack: unknown[] = new Array(1024);
  let sp = 0;
  const marks: number[] = [];
  const memo: unknown[] = [];
  builder.attachMemo?.(memo);
  let memoCount = 0;
  let budget = limits.maxBytes;
  const maxDepth = limits.maxDepth;
  const maxItems = limits.maxContainerItems;
  let pos = 0;
  let at = 0;
  const progressStep = onProgress ? Math.max(1 << 20, Math.floor(len / 200)) : Infinity;
  let nextProgress = progressStep;

  const truncated = (need: number): MemscopeError =>
    pickleError('pickle-truncated', at, `file ends inside ${opcodeName(b[at]!)} (needs ${need} more bytes, ${len - pos} left)`);
  const need = (n: number): void => {
    if (pos + n > len) throw truncated(n);
  };
  const charge = (n: number): void => {
    budget -= n;
    if (budget < 0) {
      throw pickleError('pickle-limit', at, `decoded data exceeds the memory limit of ${limits.maxBytes} bytes (limits.maxBytes)`);
    }
  };
  const push = (v: unknown): void => {
    if (sp >= maxDepth) {
      throw pickleError('pickle-limit', at, `stack deeper than ${maxDepth} (limits.maxDepth)`);
    }
    stack[sp++] = v;
  };
  const popMark = (): number => {
    const m = marks.pop();
    if (m === undefined) throw pickleError('pickle-corrupt', at, `${opcodeName(b[at]!)} without a MARK`);
    return m;
  };
  const top = (): unknown => {
    if (sp === 0 || (marks.length > 0 && marks[marks.length - 1]! >= sp)) {
      throw pickleError('pickle-corrupt', at, `${opcodeName(b[at]!)} on an empty stack`);
    }
    return stack[sp - 1];
  };
  const pop = (): unknown => {
    const v = top();
    sp--;
    return v;
  };
  const sentinel = builder.memoSentinel ?? NEVER;
  const memoGet = (i: number): unknown => {
    const v = memo[i];
    if (v === undefined) throw pickleError('pickle-corrupt', at, `memo entry ${i} does not exist`);
    return v === sentinel ? builder.materialize!(i) : v;
  };
  const memoPut = (i: number): void => {
    if (memo[i] === undefined) {
      if (++memoCount > limits.maxMemoEntries) {
        throw pickleError('pickle-limit', at, `more than ${limits.maxMemoEntries} memo entries (limits.maxMemoEntries)`);
      }
    }
    const v = top();
    memo[i] = v;
    if (trackMemo) builder.onMemoize!(v, i);
  };
  const trackMemo = builder.onMemoize !== undefined;
  const checkItems = (n: number): void => {
    if (n > maxItems) throw pickleError('pickle-limit', at, `container with more than ${maxItems} items (limits.maxContainerItems)`);
    charge(n * 8);
  };
  const readLine = (): string => {
    const nl = b.indexOf(0x0a, pos);
    if (nl < 0) throw truncated(1);
    const s = decodeUtf8(b, pos, nl);
    pos = nl + 1;
    return s;
  };
  const refuse = (what: string): never => {
    throw pickleError(
      'pickle-unsafe',
      at,
      `refusing ${what}`,
      'memscope reads plain data only and never imports or calls anything named in a pickle',
    );
  };
  const resolveGlobal = (module: string, name: string): SafeGlobal => {
    const q = `${module}.${name}`;
    if (!SAFE_GLOBALS.has(q)) refuse(`${opcodeName(b[at]!)} ${q}`);
    return new SafeGlobal(q);
  };
  const str = (n: number): string => {
    need(n);
    charge(n + 16);
    const s = decodeUtf8(b, pos, pos + n);
    pos += n;
    return s;
  };
  const bin = (n: number): Uint8Array => {
    need(n);
    charge(n + 16);
    const out = b.slice(pos, pos + n);
    pos += n;
    return out;
  };
  const u32 = (): number => {
    need(4);
    const v = view.getUint32(pos, true);
    pos += 4;
    return v;
  };
  const u64 = (): number => {
    need(8);
    const lo = view.getUint32(pos, true);
    const hi = view.getUint32(pos + 4, true);
    pos += 8;
    if (hi >= 0x200000) throw pickleError('pickle-limit', at, `length ${hi} * 2^32 + ${lo} is too large`);
    return hi * 0x100000000 + lo;
  };

  for (;;) {
    if (pos >= len) {
      at = pos;
      throw pickleError('pickle-truncated', at, 'file ends before STOP');
    }
    at = pos;
    if (pos >= nextProgress) {
      onProgress!(pos, len);
      nextProgress = pos + progressStep;
    }
    const op = b[pos++]!;
    switch (op) {
      case Op.BINGET:
      case Op.LONG_BINGET: {
        // The hottest opcodes in real snapshots (frames and dict keys are memo references): a run
        // of GETs is decoded here without going round the main loop. Anything unusual (missing or
        // released entry, full stack) takes the general path, which reports or materialises it.
        let code: number = op;
        for (;;) {
          let i: number;
          if (code === Op.BINGET) {
            if (pos >= len) throw truncated(1);
            i = b[pos++]!;
          } else {
            if (pos + 4 > len) throw truncated(4);
            i = (b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24)) >>> 0;
            pos += 4;
          }
          const v = memo[i];
          if (v === undefined || v === sentinel || sp >= maxDepth) push(memoGet(i));
          else stack[sp++] = v;
          if (pos >= len) break;
          code = b[pos]!;
          if (code !== Op.BINGET && code !== Op.LONG_BINGET) break;
          at = pos++;
        }
        break;
      }
      case Op.MEMOIZE: {
        const i = memoCount;
        if (sp === 0 || memo[i] !== undefined || i >= limits.maxMemoEntries || (marks.length > 0 && marks[marks.length - 1]! >= sp)) {
          memoPut(i); // the general path: errors, limits
          break;
        }
        const v = stack[sp - 1];
        memo[i] = v;
        memoCount++;
        if (trackMemo) builder.onMemoize!(v, i);
        break;
      }
      case Op.BINPUT:
        need(1);
        memoPut(b[pos++]!);
        break;
      case Op.LONG_BINPUT:
        memoPut(u32());
        break;
      case Op.MARK:
        if (marks.length >= maxDepth) throw pickleError('pickle-limit', at, `more than ${maxDepth} open MARKs (limits.maxDepth)`);
        marks.push(sp);
        break;
      case Op.BININT:
        need(4);
        if (sp >= maxDepth) push(0);
        stack[sp++] = b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24);
        pos += 4;
        break;
      case Op.BININT1:
        need(1);
        if (sp >= maxDepth) push(0);
        stack[sp++] = b[pos++]!;
        break;
      case Op.BININT2:
        need(2);
        if (sp >= maxDepth) push(0);
        stack[sp++] = b[pos]! | (b[pos + 1]! << 8);
        pos += 2;
        break;
      case Op.LONG1: {
        need(1);
        const n = b[pos++]!;
        need(n);
        if (sp >= maxDepth) push(0);
        stack[sp++] = decodeLong(b, pos, n);
        pos += n;
        break;
      }
      case Op.LONG4: {
        const n = view.getInt32((need(4), pos), true);
        pos += 4;
        if (n < 0) throw pickleError('pickle-corrupt', at, `LONG4 with negative length ${n}`);
        need(n);
        charge(n);
        push(decodeLong(b, pos, n));
        pos += n;
        break;
      }
      case Op.BINFLOAT:
        need(8);
        push(view.getFloat64(pos, false));
        pos += 8;
        break;
      case Op.SHORT_BINUNICODE:
        need(1);
        push(str(b[pos++]!));
        break;
      case Op.BINUNICODE:
        push(str(u32()));
        break;
      case Op.BINUNICODE8:
        push(str(u64()));
        break;
      case Op.SHORT_BINBYTES:
        need(1);
        push(bin(b[pos++]!));
        break;
      case Op.BINBYTES:
        push(bin(u32()));
        break;
      case Op.BINBYTES8:
      case Op.BYTEARRAY8:
        push(bin(u64()));
        break;
      case Op.SHORT_BINSTRING: {
        // Python 2 str; Python 3 decodes it as text (ASCII by default). Latin-1 keeps every byte.
        need(1);
        const n = b[pos++]!;
        need(n);
        charge(n + 16);
        push(decodeLatin1(b, pos, pos + n));
        pos += n;
        break;
      }
      case Op.BINSTRING: {
        const n = view.getInt32((need(4), pos), true);
        pos += 4;
        if (n < 0) throw pickleError('pickle-corrupt', at, `BINSTRING with negative length ${n}`);
        need(n);
        charge(n + 16);
        push(decodeLatin1(b, pos, pos + n));
        pos += n;
        break;
      }
      case Op.NONE:
        push(null);
        break;
      case Op.NEWTRUE:
        push(true);
        break;
      case Op.NEWFALSE:
        push(false);
        break;
      case Op.EMPTY_DICT:
        budget -= 64;
        if (budget < 0) charge(0);
        if (sp >= maxDepth) push(null);
        stack[sp++] = builder.newDict();
        break;
      case Op.EMPTY_LIST:
        budget -= 32;
        if (budget < 0) charge(0);
        if (sp >= maxDepth) push(null);
        stack[sp++] = builder.newList();
        break;
      case Op.EMPTY_TUPLE:
        push(makeTuple([]));
        break;
      case Op.EMPTY_SET:
        charge(64);
        push(new Set());
        break;
      case Op.SETITEMS: {
        const start = marks.length > 0 ? marks.pop()! : popMark();
        if (start === 0) throw pickleError('pickle-corrupt', at, 'SETITEMS with no dict below the MARK');
        if ((sp - start) % 2 !== 0) throw pickleError('pickle-corrupt', at, 'SETITEMS with an odd number of items');
        budget -= (sp - start) * 8;
        if (sp - start > maxItems || budget < 0) checkItems(sp - start);
        builder.setItems(stack[start - 1], stack, start, sp, at);
        sp = start;
        break;
      }
      case Op.SETITEM: {
        if (sp < 3 || (marks.length > 0 && marks[marks.length - 1]! > sp - 3)) {
          throw pickleError('pickle-corrupt', at, 'SETITEM needs a dict, a key and a value on the stack');
        }
        checkItems(2);
        const end = sp;
        builder.setItems(stack[end - 3], stack, end - 2, end, at);
        sp = end - 2;
        break;
      }
      case Op.APPENDS: {
        const start = marks.length > 0 ? marks.pop()! : popMark();
        if (start === 0) throw pickleError('pickle-corrupt', at, 'APPENDS with no list below the MARK');
        budget -= (sp - start) * 8;
        if (sp - start > maxItems || budget < 0) checkItems(sp - start);
        builder.appendItems(stack[start - 1], stack, start, sp, at);
        sp = start;
        break;
      }
      case Op.APPEND: {
        if (sp < 2 || (marks.length > 0 && marks[marks.length - 1]! > sp - 2)) {
          throw pickleError('pickle-corrupt', at, 'APPEND needs a list and an item on the stack');
        }
        checkItems(1);
        const end = sp;
        builder.appendItems(stack[end - 2], stack, end - 1, end, at);
        sp = end - 1;
        break;
      }
      case Op.LIST: {
        const start = popMark();
        checkItems(sp - start);
        const list = builder.newList();
        builder.appendItems(list, stack, start, sp, at);
        sp = start;
        push(list);
        break;
      }
      case Op.DICT: {
        const start = popMark();
        if ((sp - start) % 2 !== 0) throw pickleError('pickle-corrupt', at, 'DICT with an odd number of items');
        checkItems(sp - start);
        const dict = builder.newDict();
        builder.setItems(dict, stack, start, sp, at);
        sp = start;
        push(dict);
        break;
      }
      case Op.ADDITEMS: {
        const start = popMark();
        const target = start > 0 ? stack[start - 1] : undefined;
        if (!(target instanceof Set) || Object.isFrozen(target)) {
          throw pickleError('pickle-corrupt', at, 'ADDITEMS target is not a set');
        }
        checkItems(sp - start);
        for (let i = start; i < sp; i++) target.add(stack[i]);
        if (target.size > maxItems) throw pickleError('pickle-limit', at, `set with more than ${maxItems} items`);
        sp = start;
        break;
      }
      case Op.FROZENSET: {
        const start = popMark();
        checkItems(sp - start);
        const set = new Set(stack.slice(start, sp));
        sp = start;
        push(Object.freeze(set));
        break;
      }
      case Op.TUPLE: {
        const start = popMark();
        checkItems(sp - start);
        const t = makeTuple(stack.slice(start, sp));
        sp = start;
        push(t);
        break;
      }
      case Op.TUPLE1:
        push(makeTuple([pop()]));
        break;
      case Op.TUPLE2: {
        const y = pop();
        const x = pop();
        push(makeTuple([x, y]));
        break;
      }
      case Op.TUPLE3: {
        const z = pop();
        const y = pop();
        const x = pop();
        push(makeTuple([x, y, z]));
        break;
      }
      case Op.FRAME:
        // Frames only help buffered readers; the whole file is in memory, so skip the length.
        u64();
        break;
      case Op.PROTO: {
        need(1);
        const v = b[pos++]!;
        if (v > 5) throw pickleError('pickle-unsupported', at, `unsupported pickle protocol ${v} (memscope reads 2–5)`);
        break;
      }
      case Op.STOP: {
        const value = pop();
        onProgress?.(len, len);
        return builder.finish(value);
      }
      case Op.POP:
        if (marks.length > 0 && marks[marks.length - 1] === sp) sp = popMark();
        else pop();
        break;
      case Op.POP_MARK:
        sp = popMark();
        break;
      case Op.DUP:
        push(top());
        break;
      case Op.READONLY_BUFFER:
        // Marks the (in-band) buffer on top as read-only; data is the same.
        top();
        break;
      case Op.NEXT_BUFFER:
        throw pickleError(
          'pickle-unsupported',
          at,
          'NEXT_BUFFER (0x97) refers to an out-of-band buffer',
          'protocol 5 buffer_callback data is not in the file; pickle without buffer_callback',
        );
      case Op.GLOBAL: {
        const module = readLine();
        const name = readLine();
        push(resolveGlobal(module, name));
        break;
      }
      case Op.STACK_GLOBAL: {
        const name = pop();
        const module = pop();
        if (typeof module !== 'string' || typeof name !== 'string') {
          throw pickleError('pickle-corrupt', at, 'STACK_GLOBAL needs two strings on the stack');
        }
        push(resolveGlobal(module, name));
        break;
      }
      case Op.REDUCE: {
        const args = pop();
        const fn = pop();
        if (!(fn instanceof SafeGlobal)) refuse('REDUCE (0x52) of a non-global callable');
        push(applySafeGlobal(fn as SafeGlobal, args, at));
        break;
      }
      case Op.INST: {
        const module = readLine();
        const name = readLine();
        refuse(`INST (0x69) ${module}.${name}`);
        break;
      }
      case Op.BUILD:
      case Op.OBJ:
      case Op.NEWOBJ:
      case Op.NEWOBJ_EX:
      case Op.PERSID:
      case Op.BINPERSID:
      case Op.EXT1:
      case Op.EXT2:
      case Op.EXT4:
        refuse(opcodeName(op));
        break;
      case Op.INT:
      case Op.LONG:
      case Op.FLOAT:
      case Op.STRING:
      case Op.UNICODE:
      case Op.GET:
      case Op.PUT:
        throw pickleError(
          'pickle-unsupported',
          at,
          `${opcodeName(op)} is a protocol 0/1 text opcode`,
          'memscope reads protocols 2–5 (re-save with pickle.HIGHEST_PROTOCOL)',
        );
      default:
        throw pickleError('pickle-corrupt', at, `${opcodeName(op)} is not a pickle opcode`, 'the file is corrupt or not a pickle');
    }
  }
}

/**
 * Values the pickle machine decodes from opcode arguments: UTF-8 and latin-1 strings, integers of
 * any width, and the few allow-listed globals (pure data constructors) protocol 2 needs for bytes
 * and sets. Nothing else named in a pickle is ever resolved.
 */
import { pickleError, quoteName, refusal } from './errors.js';
import { opcodeName } from './opcodes.js';

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
export class SafeGlobal {
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

export function decodeLatin1(bytes: Uint8Array, start: number, end: number): string {
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

export function applySafeGlobal(fn: SafeGlobal, args: unknown, at: number): unknown {
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

export function resolveGlobal(b: Uint8Array, at: number, module: string, name: string): SafeGlobal {
  const q = `${module}.${name}`;
  if (!SAFE_GLOBALS.has(q)) throw refusal(at, `${opcodeName(b[at]!)} ${quoteName(q)}`);
  return new SafeGlobal(q);
}

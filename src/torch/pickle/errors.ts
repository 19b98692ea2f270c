/**
 * The pickle machine's errors: each a MemscopeError with the file offset first
 * (`pickle offset 12: …`), so a caller can put the file's name in front.
 */
import { MemscopeError } from '../../core/errors.js';
import { escapeControl } from '../../render/escape.js';
import { opcodeName } from './opcodes.js';

/** File offset of the piece being run (see PickleMachine.run); 0 outside a run. */
let errorBase = 0;

/** Sets the file offset that error messages add to a piece-relative offset. */
export function setErrorBase(fileOffset: number): void {
  errorBase = fileOffset;
}

/**
 * `pickle offset <at>: <message>[; <hint>]`: where, then what, so that a caller can put the file's
 * name in front (`FILE: pickle offset 12: …`). `at` is relative to the piece being run.
 */
export function pickleError(code: string, at: number, message: string, hint?: string): MemscopeError {
  return new MemscopeError(code, `pickle offset ${errorBase + at}: ${message}${hint ? `; ${hint}` : ''}`);
}

/** An opcode whose arguments run past the end of the bytes: the file's end, or only a piece's. */
export class TruncatedOpcode extends MemscopeError {}

// Error builders live outside runPickle: the main loop's position and stack pointer must not be
// captured by any closure, so that V8 keeps them in registers (captured `let`s live in a heap
// context and cost a memory access on every opcode).
export function truncatedError(b: Uint8Array, at: number, needed: number, left: number): MemscopeError {
  return new TruncatedOpcode('pickle-truncated', `pickle offset ${errorBase + at}: file ends inside ${opcodeName(b[at]!)} (needs ${needed} more bytes, ${left} left)`);
}

/**
 * Longest LONG4 integer read, in bytes (2,048 bits, ~617 decimal digits). PyTorch writes no int
 * wider than 9 bytes (2^64 − 1 as LONG1); a wider one costs quadratic time to print and makes any
 * message quoting it as long as the file, so it is refused (CPython itself refuses to print ints
 * of more than 4,300 digits).
 */
export const MAX_LONG_BYTES = 256;

export function longError(at: number, n: number): MemscopeError {
  return pickleError('pickle-limit', at, `LONG4 (0x8b) integer of ${n} bytes; memscope reads integers of up to ${MAX_LONG_BYTES} bytes`);
}

export function depthError(at: number, maxDepth: number): MemscopeError {
  return pickleError('pickle-limit', at, `stack deeper than ${maxDepth} (limits.maxDepth)`);
}

export function emptyStackError(b: Uint8Array, at: number): MemscopeError {
  return pickleError('pickle-corrupt', at, `${opcodeName(b[at]!)} on an empty stack`);
}

export function noMarkError(b: Uint8Array, at: number): MemscopeError {
  return pickleError('pickle-corrupt', at, `${opcodeName(b[at]!)} without a MARK`);
}

export function refusal(at: number, what: string): MemscopeError {
  return pickleError(
    'pickle-unsafe',
    at,
    `refusing ${what}`,
    'memscope reads plain data only and never imports or calls anything named in a pickle',
  );
}

/** Longest global name quoted in a refusal (a hostile file can make one megabytes long). */
const MAX_QUOTED_NAME = 200;

/** A module or global name from the file, as an error message may show it: escaped and bounded. */
export function quoteName(name: string): string {
  const shown = name.length > MAX_QUOTED_NAME ? `${name.slice(0, MAX_QUOTED_NAME)}… (${name.length} characters)` : name;
  return escapeControl(shown);
}


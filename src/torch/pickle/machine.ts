/**
 * The pickle virtual machine: walks the opcode stream of protocols 2–5 and builds values,
 * never executing anything. Containers are made by a `PickleBuilder`, so the same loop serves
 * the generic reader (Map / Array values) and the columnar snapshot decoder (which recognises
 * trace entries, blocks and frames while they are being built and stores them in typed arrays).
 *
 * Safety: GLOBAL / STACK_GLOBAL resolve only a handful of pure data constructors that protocol 2
 * uses for bytes and sets (`_codecs.encode`, `builtins.set`, `frozenset`, `bytearray`), implemented
 * in TypeScript in values.ts; every other global, REDUCE of anything else, BUILD, INST, OBJ, NEWOBJ(_EX),
 * PERSID, BINPERSID and EXT* are refused with a `MemscopeError` naming the opcode and offset.
 * Every loop iteration advances the read position, so no input can make it spin; sizes are checked
 * against `PickleLimits` before anything is allocated.
 *
 * `PickleMachine` keeps the state between calls so a big file can be fed in pieces cut anywhere
 * (an opcode cut short waits for the next piece); `runPickle` runs a whole buffer at once.
 */
import { MemscopeError } from '../../core/errors.js';
import { PickleMemo } from './memo.js';
import { opcodeName } from './opcodes.js';
import {
  MAX_LONG_BYTES,
  TruncatedOpcode,
  depthError,
  emptyStackError,
  longError,
  noMarkError,
  pickleError,
  quoteName,
  refusal,
  setErrorBase,
  truncatedError,
} from './errors.js';
import { applySafeGlobal, decodeLatin1, decodeLong, decodeUtf8, resolveGlobal, SafeGlobal } from './values.js';
import { makeTuple, type FastLane, type PickleBuilder, type PickleLimits } from './builder.js';

/** Most of the byte budget the machine's loop holds at a time (PickleMachine.refill). */
const BUDGET_SLICE = 1 << 30;

/** Runs the machine over `bytes` and returns what STOP returns (after `builder.finish`). */
export function runPickle(
  bytes: Uint8Array,
  builder: PickleBuilder,
  limits: PickleLimits,
  onProgress?: (bytesRead: number, totalBytes: number) => void,
): unknown {
  const machine = new PickleMachine(builder, limits, onProgress);
  return machine.run(bytes, 0, true, bytes.length).value;
}

/** What `PickleMachine.run` returns: `done` once STOP was executed. */
export interface PickleRunResult {
  readonly done: boolean;
  readonly value: unknown;
  /**
   * Bytes of this piece that were executed. Short of its length only when the piece was not
   * `final` and ends inside an opcode: that opcode (from `consumed` on) must start the next piece.
   */
  readonly consumed: number;
}

/**
 * The machine with its state (stack, marks, memo, counters) kept between calls, so a file can be
 * fed in pieces: memory then holds one piece of the file at a time instead of all of it.
 */
export class PickleMachine {
  // The VM stack: a preallocated array and a pointer (setting an array's length is a runtime call).
  private readonly stack: unknown[] = new Array(1024);
  private readonly marks: number[] = [];
  private readonly memo: PickleMemo;
  private readonly lane: FastLane;
  private sp = 0;
  private memoCount = 0;
  /**
   * What is left of the `maxBytes` budget, in two parts: `budget`, at most BUDGET_SLICE, which the
   * loop counts down, and `budgetReserve`, the rest, moved into it when it runs out (`refill`).
   * Why: the default budget (8 GiB) is not a small integer, and in V8's baseline tiers, where the
   * loop runs until it is optimised, arithmetic on it made a heap number per opcode that charges
   * (~21 MB of garbage on the 97 MB bench file); a slice below 2^30 is always a small integer.
   */
  private budget: number;
  private budgetReserve: number;
  private nextProgress = 0;
  private finished = false;

  /** `budgetSlice`: see `budget` (smaller only in tests, to make `refill` run often). */
  constructor(
    private readonly builder: PickleBuilder,
    private readonly limits: PickleLimits,
    private readonly onProgress?: (bytesRead: number, totalBytes: number) => void,
    private readonly budgetSlice = BUDGET_SLICE,
  ) {
    this.memo = new PickleMemo(builder.memoCapacityHint ?? 0);
    builder.attachMemo?.(this.memo);
    this.lane = { memoCount: 0, maxMemoEntries: limits.maxMemoEntries, maxSpan: 0, markRoom: 0, budget: 0, charge: 0, value: null };
    this.budget = Math.min(limits.maxBytes, budgetSlice);
    this.budgetReserve = limits.maxBytes - this.budget;
  }

  /**
   * `budget` has run out (it is below 0): moves up to BUDGET_SLICE more from the reserve into it,
   * or throws the limit error if the whole budget is spent.
   */
  private refill(budget: number, at: number): number {
    const left = budget + this.budgetReserve;
    if (left < 0) throw pickleError('pickle-limit', at, `decoded data exceeds the memory limit of ${this.limits.maxBytes} bytes (limits.maxBytes)`);
    const slice = Math.min(left, this.budgetSlice);
    this.budgetReserve = left - slice;
    return slice;
  }

  /** Takes the builder's `pendingCharge` from the budget (see PickleBuilder.pendingCharge). */
  private takePending(budget: number, at: number): number {
    const left = budget - this.builder.pendingCharge!;
    this.builder.pendingCharge = 0;
    return left < 0 ? this.refill(left, at) : left;
  }

  /**
   * Runs over `bytes`, which start at file offset `base` (error offsets and progress are file
   * offsets). Unless `final`, `bytes` may end anywhere: the machine stops before an opcode the
   * piece holds only part of and returns `{ done: false, consumed }`; the next piece must start
   * at `base + consumed`.
   */
  run(bytes: Uint8Array, base: number, final: boolean, totalBytes: number): PickleRunResult {
    if (this.finished) throw new MemscopeError('bad-argument', 'PickleMachine.run: the pickle already ended with STOP');
    setErrorBase(base);
    try {
      return this.runPiece(bytes, base, final, totalBytes);
    } finally {
      setErrorBase(0);
    }
  }

  private runPiece(bytes: Uint8Array, base: number, final: boolean, totalBytes: number): PickleRunResult {
    const builder = this.builder;
    const limits = this.limits;
    const onProgress = this.onProgress;
    // A plain Uint8Array view: Node Buffers' subarray is slower.
    const b =
      Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const len = b.length;
    // A piece that is not the last stops at the first opcode boundary in its final 1/16 (at most
    // 64 KiB), which almost every opcode then fits before: cutting one short is handled (below)
    // but costs the optimised loop a deoptimisation, since that path is otherwise never taken.
    const stopAt = final ? len : len - Math.min(len >> 4, 1 << 16);
    const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const stack = this.stack;
    const marks = this.marks;
    const memo = this.memo;
    // The memo's two arrays as locals for GET, the hottest opcode; `refs` is reloaded after a put
    // (which may grow it).
    let memoRefs = memo.refs;
    const memoValues = memo.values;
    const trackMemo = builder.onMemoize !== undefined;
    const chargesExtra = builder.pendingCharge !== undefined;
    const hasFastDict = builder.fastDict !== undefined;
    const lane = this.lane;
    const maxDepth = limits.maxDepth;
    const maxItems = limits.maxContainerItems;
    const maxMemo = limits.maxMemoEntries;
    const progressStep = onProgress ? Math.max(1 << 20, Math.floor(totalBytes / 200)) : Infinity;
    // Progress positions are piece-relative inside the loop.
    let nextProgress = onProgress ? Math.max(0, this.nextProgress - base) : Infinity;
    let memoCount = this.memoCount;
    let budget = this.budget;
    let pos = 0;
    let sp = this.sp;
    let at = 0;

    const tooMany = (at: number): MemscopeError =>
      pickleError('pickle-limit', at, `container with more than ${maxItems} items (limits.maxContainerItems)`);
    /** A memo entry for GET that is not a held value in `refs`: released by the builder, sparse, or missing. */
    const memoValue = (i: number, at: number): unknown => {
      const id = memo.releasedId(i);
      if (id >= 0) return builder.materialize!(i, id);
      const v = memo.sparseValue(i);
      if (v === undefined) throw pickleError('pickle-corrupt', at, `memo entry ${i} does not exist`);
      return v;
    };

    try {
      for (;;) {
        if (pos >= stopAt) {
          if (final) throw pickleError('pickle-truncated', pos, 'file ends before STOP');
          at = pos;
          break;
        }
        at = pos;
        if (pos >= nextProgress) {
          onProgress!(base + pos, totalBytes);
          nextProgress = pos + progressStep;
        }
        const op = b[pos++]!;
        // Case labels are number literals (not Op.X) so V8 compiles the switch to a jump table.
        switch (op) {
          case 0x68 /* BINGET */:
          case 0x6a /* LONG_BINGET */: {
            // The hottest opcodes in real snapshots (frames and dict keys are memo references): a run
            // of GETs is decoded here without going round the main loop.
            let code: number = op;
            for (;;) {
              let i: number;
              if (code === 0x68 /* BINGET */) {
                if (pos >= len) throw truncatedError(b, at, 1, 0);
                i = b[pos++]!;
              } else {
                if (pos + 4 > len) throw truncatedError(b, at, 4, len - pos);
                i = (b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24)) >>> 0;
                pos += 4;
              }
              if (sp >= maxDepth) throw depthError(at, maxDepth);
              // Past the end of `refs`, r is undefined and memoValue decides.
              const r = memoRefs[i]!;
              if (r > 0) stack[sp++] = memoValues[r - 1];
              else {
                stack[sp++] = memoValue(i, at);
                if (chargesExtra && builder.pendingCharge! > 0) budget = this.takePending(budget, at);
              }
              if (pos >= len) break;
              code = b[pos]!;
              if (code !== 0x68 /* BINGET */ && code !== 0x6a /* LONG_BINGET */) break;
              at = pos++;
            }
            break;
          }
          case 0x94 /* MEMOIZE */:
          case 0x71 /* BINPUT */:
          case 0x72 /* LONG_BINPUT */: {
            let i: number;
            if (op === 0x94 /* MEMOIZE */) i = memoCount;
            else if (op === 0x71 /* BINPUT */) {
              if (pos >= len) throw truncatedError(b, at, 1, 0);
              i = b[pos++]!;
            } else {
              if (pos + 4 > len) throw truncatedError(b, at, 4, len - pos);
              i = (b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24)) >>> 0;
              pos += 4;
            }
            if (sp === 0 || (marks.length > 0 && marks[marks.length - 1]! >= sp)) throw emptyStackError(b, at);
            const replaced = memo.has(i);
            if (!replaced && ++memoCount > maxMemo) {
              throw pickleError('pickle-limit', at, `more than ${maxMemo} memo entries (limits.maxMemoEntries)`);
            }
            const v = stack[sp - 1];
            memo.put(i, v);
            memoRefs = memo.refs;
            if (trackMemo) builder.onMemoize!(v, i, replaced);
            break;
          }
          case 0x28 /* MARK */:
            if (marks.length >= maxDepth) throw pickleError('pickle-limit', at, `more than ${maxDepth} open MARKs (limits.maxDepth)`);
            marks.push(sp);
            break;
          case 0x4a /* BININT */:
            if (pos + 4 > len) throw truncatedError(b, at, 4, len - pos);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24);
            pos += 4;
            break;
          case 0x4b /* BININT1 */:
            if (pos >= len) throw truncatedError(b, at, 1, 0);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = b[pos++]!;
            break;
          case 0x4d /* BININT2 */:
            if (pos + 2 > len) throw truncatedError(b, at, 2, len - pos);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = b[pos]! | (b[pos + 1]! << 8);
            pos += 2;
            break;
          case 0x8a /* LONG1 */:
          case 0x8b /* LONG4 */: {
            let n: number;
            if (op === 0x8a /* LONG1 */) {
              if (pos >= len) throw truncatedError(b, at, 1, 0);
              n = b[pos++]!;
            } else {
              if (pos + 4 > len) throw truncatedError(b, at, 4, len - pos);
              n = view.getInt32(pos, true);
              pos += 4;
              if (n < 0) throw pickleError('pickle-corrupt', at, `LONG4 with negative length ${n}`);
              if (n > MAX_LONG_BYTES) throw longError(at, n);
              // Charged once, when the piece holds the whole number (a cut-off one is run again).
              if (!final && pos + n > len) throw truncatedError(b, at, n, len - pos);
              budget -= n;
              if (budget < 0) budget = this.refill(budget, at);
            }
            if (pos + n > len) throw truncatedError(b, at, n, len - pos);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = decodeLong(b, pos, n);
            pos += n;
            break;
          }
          case 0x47 /* BINFLOAT */:
            if (pos + 8 > len) throw truncatedError(b, at, 8, len - pos);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = view.getFloat64(pos, false);
            pos += 8;
            break;
          case 0x8c /* SHORT_BINUNICODE */:
          case 0x58 /* BINUNICODE */:
          case 0x8d /* BINUNICODE8 */:
          case 0x43 /* SHORT_BINBYTES */:
          case 0x42 /* BINBYTES */:
          case 0x8e /* BINBYTES8 */:
          case 0x96 /* BYTEARRAY8 */:
          case 0x55 /* SHORT_BINSTRING */:
          case 0x54 /* BINSTRING */: {
            // Length prefix: 1, 4 or 8 bytes little-endian.
            const width =
              op === 0x8c /* SHORT_BINUNICODE */ || op === 0x43 /* SHORT_BINBYTES */ || op === 0x55 /* SHORT_BINSTRING */
                ? 1
                : op === 0x8d /* BINUNICODE8 */ || op === 0x8e /* BINBYTES8 */ || op === 0x96 /* BYTEARRAY8 */
                  ? 8
                  : 4;
            if (pos + width > len) throw truncatedError(b, at, width, len - pos);
            let n: number;
            if (width === 1) n = b[pos]!;
            else if (width === 4) n = op === 0x54 /* BINSTRING */ ? view.getInt32(pos, true) : view.getUint32(pos, true);
            else {
              const hi = view.getUint32(pos + 4, true);
              if (hi >= 0x200000) throw pickleError('pickle-limit', at, `length ${hi} * 2^32 + ${view.getUint32(pos, true)} is too large`);
              n = hi * 0x100000000 + view.getUint32(pos, true);
            }
            pos += width;
            if (n < 0) throw pickleError('pickle-corrupt', at, `${opcodeName(op)} with negative length ${n}`);
            if (pos + n > len) throw truncatedError(b, at, n, len - pos);
            budget -= n + 16;
            if (budget < 0) budget = this.refill(budget, at);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            let v: unknown;
            if (op === 0x8c /* SHORT_BINUNICODE */ || op === 0x58 /* BINUNICODE */ || op === 0x8d /* BINUNICODE8 */) v = decodeUtf8(b, pos, pos + n);
            // Python 2 str; Python 3 decodes it as text (ASCII by default). Latin-1 keeps every byte.
            else if (op === 0x55 /* SHORT_BINSTRING */ || op === 0x54 /* BINSTRING */) v = decodeLatin1(b, pos, pos + n);
            else v = b.slice(pos, pos + n);
            stack[sp++] = v;
            pos += n;
            break;
          }
          case 0x4e /* NONE */:
          case 0x88 /* NEWTRUE */:
          case 0x89 /* NEWFALSE */:
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = op === 0x4e /* NONE */ ? null : op === 0x88 /* NEWTRUE */;
            break;
          case 0x7d /* EMPTY_DICT */:
          case 0x5d /* EMPTY_LIST */: {
            budget -= 64;
            if (budget < 0) budget = this.refill(budget, at);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            const isDict = op === 0x7d; /* EMPTY_DICT */
            if (isDict && hasFastDict) {
              lane.memoCount = memoCount;
              // Each opcode pushes at most one item and takes at least one byte: a span shorter than
              // this cannot reach the depth, MARK or container-size limits.
              lane.maxSpan = marks.length + 2 <= maxDepth ? Math.min(maxDepth - sp - 2, maxItems) : 0;
              lane.markRoom = maxDepth - marks.length;
              lane.budget = budget;
              const end = builder.fastDict!(b, at, memo, lane);
              if (end > 0) {
                budget -= lane.charge;
                memoCount = lane.memoCount;
                stack[sp++] = lane.value;
                pos = end;
                break;
              }
            }
            stack[sp++] = isDict ? builder.newDict() : builder.newList();
            break;
          }
          case 0x29 /* EMPTY_TUPLE */:
          case 0x8f /* EMPTY_SET */:
            budget -= 64;
            if (budget < 0) budget = this.refill(budget, at);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = op === 0x29 /* EMPTY_TUPLE */ ? makeTuple([]) : new Set();
            break;
          case 0x75 /* SETITEMS */:
          case 0x65 /* APPENDS */:
          case 0x90 /* ADDITEMS */: {
            const start = marks.pop();
            if (start === undefined) throw noMarkError(b, at);
            const n = sp - start;
            if (n > maxItems) throw tooMany(at);
            budget -= n * 8;
            if (budget < 0) budget = this.refill(budget, at);
            if (start === 0) throw pickleError('pickle-corrupt', at, `${opcodeName(op)} with no container below the MARK`);
            const target = stack[start - 1];
            if (op === 0x75 /* SETITEMS */) {
              if (n % 2 !== 0) throw pickleError('pickle-corrupt', at, 'SETITEMS with an odd number of items');
              builder.setItems(target, stack, start, sp, at);
            } else if (op === 0x65 /* APPENDS */) builder.appendItems(target, stack, start, sp, at);
            else {
              if (!(target instanceof Set) || Object.isFrozen(target)) throw pickleError('pickle-corrupt', at, 'ADDITEMS target is not a set');
              for (let i = start; i < sp; i++) target.add(stack[i]);
              if (target.size > maxItems) throw tooMany(at);
            }
            if (chargesExtra && builder.pendingCharge! > 0) budget = this.takePending(budget, at);
            sp = start;
            break;
          }
          case 0x73 /* SETITEM */:
          case 0x61 /* APPEND */: {
            // dict key value SETITEM / list item APPEND, all above the innermost MARK.
            const k = op === 0x73 /* SETITEM */ ? 3 : 2;
            if (sp < k || (marks.length > 0 && marks[marks.length - 1]! > sp - k)) {
              throw pickleError('pickle-corrupt', at, op === 0x73 /* SETITEM */ ? 'SETITEM needs a dict, a key and a value on the stack' : 'APPEND needs a list and an item on the stack');
            }
            budget -= 16;
            if (budget < 0) budget = this.refill(budget, at);
            if (op === 0x73 /* SETITEM */) builder.setItems(stack[sp - 3], stack, sp - 2, sp, at);
            else builder.appendItems(stack[sp - 2], stack, sp - 1, sp, at);
            if (chargesExtra && builder.pendingCharge! > 0) budget = this.takePending(budget, at);
            sp -= k - 1;
            break;
          }
          case 0x6c /* LIST */:
          case 0x64 /* DICT */:
          case 0x74 /* TUPLE */:
          case 0x91 /* FROZENSET */: {
            const start = marks.pop();
            if (start === undefined) throw noMarkError(b, at);
            const n = sp - start;
            if (n > maxItems) throw tooMany(at);
            budget -= n * 8 + 64;
            if (budget < 0) budget = this.refill(budget, at);
            let v: unknown;
            if (op === 0x6c /* LIST */) {
              v = builder.newList();
              builder.appendItems(v, stack, start, sp, at);
            } else if (op === 0x64 /* DICT */) {
              if (n % 2 !== 0) throw pickleError('pickle-corrupt', at, 'DICT with an odd number of items');
              v = builder.newDict();
              builder.setItems(v, stack, start, sp, at);
            } else if (op === 0x74 /* TUPLE */) v = makeTuple(stack.slice(start, sp));
            else v = Object.freeze(new Set(stack.slice(start, sp)));
            if (chargesExtra && builder.pendingCharge! > 0) budget = this.takePending(budget, at);
            sp = start;
            stack[sp++] = v;
            break;
          }
          case 0x85 /* TUPLE1 */:
          case 0x86 /* TUPLE2 */:
          case 0x87 /* TUPLE3 */: {
            const n = op - 0x85 /* TUPLE1 */ + 1;
            if (sp < n || (marks.length > 0 && marks[marks.length - 1]! > sp - n)) throw emptyStackError(b, at);
            const t = makeTuple(stack.slice(sp - n, sp));
            sp -= n;
            stack[sp++] = t;
            break;
          }
          case 0x95 /* FRAME */: {
            // Frames only help buffered readers, but a frame longer than what is left of the file
            // means the file was cut short: CPython refuses it ("pickle data was truncated").
            if (pos + 8 > len) throw truncatedError(b, at, 8, len - pos);
            const frameHi = view.getUint32(pos + 4, true);
            const frameLength = frameHi * 0x100000000 + view.getUint32(pos, true);
            const fileLeft = totalBytes - (base + pos + 8);
            if (frameLength > fileLeft) {
              throw pickleError('pickle-truncated', at, `FRAME (0x95) of ${frameLength} bytes runs past the end of the file (${fileLeft} bytes left)`, 'the file is truncated');
            }
            pos += 8;
            break;
          }
          case 0x80 /* PROTO */: {
            if (pos >= len) throw truncatedError(b, at, 1, 0);
            const v = b[pos++]!;
            if (v > 5) throw pickleError('pickle-unsupported', at, `unsupported pickle protocol ${v} (memscope reads 2–5)`);
            break;
          }
          case 0x2e /* STOP */: {
            if (sp === 0 || (marks.length > 0 && marks[marks.length - 1]! >= sp)) throw emptyStackError(b, at);
            const value = stack[sp - 1];
            onProgress?.(base + len, totalBytes);
            this.finished = true;
            this.sp = sp;
            return { done: true, value: builder.finish(value), consumed: pos };
          }
          case 0x30 /* POP */:
            if (marks.length > 0 && marks[marks.length - 1] === sp) sp = marks.pop()!;
            else if (sp === 0) throw emptyStackError(b, at);
            else sp--;
            break;
          case 0x31 /* POP_MARK */: {
            const start = marks.pop();
            if (start === undefined) throw noMarkError(b, at);
            sp = start;
            break;
          }
          case 0x32 /* DUP */:
            if (sp === 0 || (marks.length > 0 && marks[marks.length - 1]! >= sp)) throw emptyStackError(b, at);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp] = stack[sp - 1];
            sp++;
            break;
          case 0x98 /* READONLY_BUFFER */:
            // Marks the (in-band) buffer on top as read-only; data is the same.
            if (sp === 0) throw emptyStackError(b, at);
            break;
          case 0x97 /* NEXT_BUFFER */:
            throw pickleError(
              'pickle-unsupported',
              at,
              'NEXT_BUFFER (0x97) refers to an out-of-band buffer',
              'protocol 5 buffer_callback data is not in the file; pickle without buffer_callback',
            );
          case 0x63 /* GLOBAL */:
          case 0x69 /* INST */: {
            // Both carry "module\nname\n" inline; INST is always refused.
            const nl1 = b.indexOf(0x0a, pos);
            const nl2 = nl1 < 0 ? -1 : b.indexOf(0x0a, nl1 + 1);
            if (nl2 < 0) throw truncatedError(b, at, 1, len - pos);
            const module = decodeUtf8(b, pos, nl1);
            const name = decodeUtf8(b, nl1 + 1, nl2);
            pos = nl2 + 1;
            if (op === 0x69 /* INST */) throw refusal(at, `INST (0x69) ${quoteName(`${module}.${name}`)}`);
            if (sp >= maxDepth) throw depthError(at, maxDepth);
            stack[sp++] = resolveGlobal(b, at, module, name);
            break;
          }
          case 0x93 /* STACK_GLOBAL */: {
            if (sp < 2 || (marks.length > 0 && marks[marks.length - 1]! > sp - 2)) throw emptyStackError(b, at);
            const module = stack[sp - 2];
            const name = stack[sp - 1];
            if (typeof module !== 'string' || typeof name !== 'string') {
              throw pickleError('pickle-corrupt', at, 'STACK_GLOBAL needs two strings on the stack');
            }
            sp -= 2;
            stack[sp++] = resolveGlobal(b, at, module, name);
            break;
          }
          case 0x52 /* REDUCE */: {
            if (sp < 2 || (marks.length > 0 && marks[marks.length - 1]! > sp - 2)) throw emptyStackError(b, at);
            const fn = stack[sp - 2];
            const args = stack[sp - 1];
            if (!(fn instanceof SafeGlobal)) throw refusal(at, 'REDUCE (0x52) of a non-global callable');
            sp -= 2;
            stack[sp++] = applySafeGlobal(fn, args, at);
            break;
          }
          case 0x62 /* BUILD */:
          case 0x6f /* OBJ */:
          case 0x81 /* NEWOBJ */:
          case 0x92 /* NEWOBJ_EX */:
          case 0x50 /* PERSID */:
          case 0x51 /* BINPERSID */:
          case 0x82 /* EXT1 */:
          case 0x83 /* EXT2 */:
          case 0x84 /* EXT4 */:
            throw refusal(at, opcodeName(op));
          case 0x49 /* INT */:
          case 0x4c /* LONG */:
          case 0x46 /* FLOAT */:
          case 0x53 /* STRING */:
          case 0x56 /* UNICODE */:
          case 0x67 /* GET */:
          case 0x70 /* PUT */:
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
    } catch (e) {
      // A piece that is not the last may cut an opcode short: every handler checks its argument
      // bytes before it changes any state, so the machine stops cleanly before that opcode.
      if (final || !(e instanceof TruncatedOpcode)) throw e;
    }
    // End of this piece: keep the state for the next one.
    this.sp = sp;
    this.memoCount = memoCount;
    this.budget = budget;
    this.nextProgress = nextProgress === Infinity ? 0 : base + nextProgress;
    return { done: false, value: undefined, consumed: at };
  }
}

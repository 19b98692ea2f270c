/**
 * Raw inflate (RFC 1951) in plain code, synchronous. A report page inflates the buffer its first
 * frame reads with this: the platform's DecompressionStream hands its output over in 64 KiB
 * chunks, a promise each, and in Chromium takes 45–235 ms for the 2 MB the 100 MB bench
 * snapshot's first frame reads, where this takes a few tens; and done at once, the first frame is
 * drawn in the app script's own task, before the HTML parser reads the rest of the page. The rest
 * of the data still inflates with DecompressionStream, off this path.
 */

/** Base lengths of length codes 257…285, and their extra bits. */
const LENGTH_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LENGTH_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
/** Base distances of distance codes 0…29, and their extra bits. */
const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
/** The order in which a dynamic block gives its code-length code's lengths. */
const CLEN_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/** Why a stream does not inflate; the caller names the buffer. */
export class InflateError extends Error {}

/**
 * A canonical Huffman code as a lookup table indexed by the next `bits` input bits (first bit
 * lowest): each entry is `symbol << 4 | code length`, 0 where no code starts with those bits.
 */
interface Code {
  readonly table: Int32Array;
  readonly bits: number;
}

function buildCode(lengths: ArrayLike<number>, count: number): Code {
  const perLength = new Int32Array(16);
  let bits = 0;
  for (let s = 0; s < count; s++) {
    const l = lengths[s]!;
    perLength[l]++;
    if (l > bits) bits = l;
  }
  perLength[0] = 0;
  // Over-subscribed lengths describe no prefix code.
  let left = 1;
  for (let l = 1; l <= 15; l++) {
    left = left * 2 - perLength[l]!;
    if (left < 0) throw new InflateError('a Huffman code is over-subscribed');
  }
  const next = new Int32Array(16);
  for (let l = 1, code = 0; l <= 15; l++) {
    code = (code + perLength[l - 1]!) << 1;
    next[l] = code;
  }
  const table = new Int32Array(1 << bits);
  for (let s = 0; s < count; s++) {
    const l = lengths[s]!;
    if (!l) continue;
    // Codes are read first bit first, so the table is indexed by the code's bits reversed.
    let code = next[l]++;
    let reversed = 0;
    for (let i = 0; i < l; i++) {
      reversed = (reversed << 1) | (code & 1);
      code >>= 1;
    }
    for (let i = reversed; i < table.length; i += 1 << l) table[i] = (s << 4) | l;
  }
  return { table, bits };
}

let fixedLengths: Code | null = null;
let fixedDistances: Code | null = null;

function fixedCodes(): [Code, Code] {
  if (!fixedLengths || !fixedDistances) {
    const l = new Uint8Array(288);
    l.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288);
    fixedLengths = buildCode(l, 288);
    fixedDistances = buildCode(new Uint8Array(30).fill(5), 30);
  }
  return [fixedLengths, fixedDistances];
}

/** Where the reader is: the next input byte and the bits taken from before it, not yet used (first bit lowest). */
interface Bits {
  readonly input: Uint8Array;
  pos: number;
  buf: number;
  count: number;
}

/** Makes `n` bits (n ≤ 16) ready. Past the input's end it reads zeros, and fails once it would need more than four of them. */
function need(r: Bits, n: number): void {
  while (r.count < n) {
    if (r.pos >= r.input.length + 4) throw new InflateError('the stream ends early');
    r.buf |= (r.pos < r.input.length ? r.input[r.pos]! : 0) << r.count;
    r.pos++;
    r.count += 8;
  }
}

function bits(r: Bits, n: number): number {
  need(r, n);
  const v = r.buf & ((1 << n) - 1);
  r.buf >>>= n;
  r.count -= n;
  return v;
}

function decode(r: Bits, code: Code): number {
  need(r, code.bits);
  const entry = code.table[r.buf & ((1 << code.bits) - 1)]!;
  const l = entry & 15;
  if (!l) throw new InflateError('a code is not in its table');
  r.buf >>>= l;
  r.count -= l;
  return entry >> 4;
}

/** A dynamic block's two codes, read from its header. */
function dynamicCodes(r: Bits): [Code, Code] {
  const nlit = bits(r, 5) + 257;
  const ndist = bits(r, 5) + 1;
  const nclen = bits(r, 4) + 4;
  if (nlit > 286 || ndist > 30) throw new InflateError('a block has too many codes');
  const clen = new Uint8Array(19);
  for (let i = 0; i < nclen; i++) clen[CLEN_ORDER[i]!] = bits(r, 3);
  const clenCode = buildCode(clen, 19);
  const lengths = new Uint8Array(nlit + ndist);
  for (let i = 0; i < nlit + ndist; ) {
    const sym = decode(r, clenCode);
    if (sym < 16) {
      lengths[i++] = sym;
      continue;
    }
    let repeat: number;
    let value = 0;
    if (sym === 16) {
      if (i === 0) throw new InflateError('a length repeats before any length');
      value = lengths[i - 1]!;
      repeat = 3 + bits(r, 2);
    } else if (sym === 17) repeat = 3 + bits(r, 3);
    else repeat = 11 + bits(r, 7);
    if (i + repeat > nlit + ndist) throw new InflateError('code lengths run past their count');
    lengths.fill(value, i, i + repeat);
    i += repeat;
  }
  if (!lengths[256]) throw new InflateError('a block has no end-of-block code');
  return [buildCode(lengths.subarray(0, nlit), nlit), buildCode(lengths.subarray(nlit), ndist)];
}

/** Inflates the raw deflate stream `input` into exactly `size` bytes; throws InflateError when it cannot. */
export function inflateRaw(input: Uint8Array, size: number): Uint8Array {
  let out: Uint8Array;
  try {
    out = new Uint8Array(size);
  } catch {
    throw new InflateError(`no buffer of ${size} bytes can be made`);
  }
  const r: Bits = { input, pos: 0, buf: 0, count: 0 };
  let op = 0;
  for (let last = 0; !last; ) {
    last = bits(r, 1);
    const type = bits(r, 2);
    if (type === 0) {
      // Stored: from the next byte boundary, a length, its complement, the bytes.
      r.pos -= r.count >> 3;
      r.buf = 0;
      r.count = 0;
      const pos = r.pos;
      if (pos + 4 > input.length) throw new InflateError('the stream ends early');
      const len = input[pos]! | (input[pos + 1]! << 8);
      if ((len ^ 0xffff) !== (input[pos + 2]! | (input[pos + 3]! << 8))) throw new InflateError('a stored block has a damaged length');
      if (pos + 4 + len > input.length) throw new InflateError('the stream ends early');
      if (op + len > size) throw new InflateError(`it holds more than ${size} bytes`);
      out.set(input.subarray(pos + 4, pos + 4 + len), op);
      r.pos = pos + 4 + len;
      op += len;
      continue;
    }
    if (type === 3) throw new InflateError('a block has the reserved type');
    const [lit, dist] = type === 1 ? fixedCodes() : dynamicCodes(r);
    op = inflateBlock(r, lit, dist, out, op);
  }
  if (op !== size) throw new InflateError(`it holds ${op} bytes, not ${size}`);
  return out;
}

/** One Huffman block's symbols into `out` from `op`; returns where it stopped. The hot loop: the reader's state in locals. */
function inflateBlock(r: Bits, lit: Code, dist: Code, out: Uint8Array, op: number): number {
  const input = r.input;
  const end = input.length;
  const size = out.length;
  const litTable = lit.table;
  const litMask = (1 << lit.bits) - 1;
  let pos = r.pos;
  let buf = r.buf;
  let count = r.count;
  for (;;) {
    // 15 bits of code and up to 5 extra: the buffer is refilled to at least 24 bits.
    while (count < 24) {
      if (pos >= end + 4) throw new InflateError('the stream ends early');
      buf |= (pos < end ? input[pos]! : 0) << count;
      pos++;
      count += 8;
    }
    const entry = litTable[buf & litMask]!;
    const l = entry & 15;
    if (!l) throw new InflateError('a code is not in its table');
    buf >>>= l;
    count -= l;
    const sym = entry >> 4;
    if (sym < 256) {
      if (op >= size) throw new InflateError(`it holds more than ${size} bytes`);
      out[op++] = sym;
      continue;
    }
    if (sym === 256) break;
    const li = sym - 257;
    if (li >= 29) throw new InflateError('a length code is out of range');
    const lx = LENGTH_EXTRA[li]!;
    const len = LENGTH_BASE[li]! + (buf & ((1 << lx) - 1));
    buf >>>= lx;
    count -= lx;
    r.pos = pos;
    r.buf = buf;
    r.count = count;
    const di = decode(r, dist);
    if (di >= 30) throw new InflateError('a distance code is out of range');
    const d = DIST_BASE[di]! + bits(r, DIST_EXTRA[di]!);
    pos = r.pos;
    buf = r.buf;
    count = r.count;
    if (d > op) throw new InflateError('a distance reaches before the start');
    if (op + len > size) throw new InflateError(`it holds more than ${size} bytes`);
    for (let k = 0; k < len; k++, op++) out[op] = out[op - d]!;
  }
  r.pos = pos;
  r.buf = buf;
  r.count = count;
  return op;
}

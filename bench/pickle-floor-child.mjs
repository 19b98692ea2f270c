// Child process for bench/pickle.bench.mjs: the least any single-threaded JavaScript reader of a
// pickle must do, as a floor under `memscope summary`'s end-to-end time. It reads the file and
// steps over every opcode and its argument without building a value, resolving a memo entry or
// checking anything, then exits. Process start to exit of this child is what a reader that did
// no work of its own would take; whatever `memscope summary` takes beyond it is decoding,
// normalising and the summary's figures.
//
// Binary protocols (2–5) only, which is what PyTorch writes. An opcode it does not know (a text
// opcode, or a corrupt file) stops it with an error naming the offset.
//
// usage: node bench/pickle-floor-child.mjs FILE   → one JSON line {readMs, walkMs, opcodes}
import { readFileSync } from 'node:fs';

/** Bytes of argument after each opcode with a fixed-size argument. */
const FIXED = new Int8Array(256).fill(-1);
for (const op of [0x28, 0x2e, 0x30, 0x31, 0x32, 0x4e, 0x52, 0x61, 0x62, 0x64, 0x7d, 0x65, 0x6c, 0x5d, 0x6f, 0x73, 0x74, 0x29, 0x75, 0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98])
  FIXED[op] = 0;
for (const op of [0x4b, 0x68, 0x71, 0x80, 0x82]) FIXED[op] = 1; // BININT1 BINGET BINPUT PROTO EXT1
for (const op of [0x4d, 0x83]) FIXED[op] = 2; // BININT2 EXT2
for (const op of [0x4a, 0x6a, 0x72, 0x84]) FIXED[op] = 4; // BININT LONG_BINGET LONG_BINPUT EXT4
for (const op of [0x47, 0x95]) FIXED[op] = 8; // BINFLOAT FRAME

const u32 = (b, p) => (b[p] | (b[p + 1] << 8) | (b[p + 2] << 16) | (b[p + 3] << 24)) >>> 0;

function walk(b) {
  const len = b.length;
  let p = 0;
  let n = 0;
  while (p < len) {
    const op = b[p++];
    n++;
    const fixed = FIXED[op];
    if (fixed >= 0) {
      p += fixed;
      if (op === 0x2e) return n; // STOP
      continue;
    }
    switch (op) {
      case 0x8a: // LONG1
      case 0x8c: // SHORT_BINUNICODE
      case 0x43: // SHORT_BINBYTES
      case 0x55: // SHORT_BINSTRING
        p += 1 + b[p];
        break;
      case 0x8b: // LONG4
      case 0x58: // BINUNICODE
      case 0x42: // BINBYTES
      case 0x54: // BINSTRING
        p += 4 + u32(b, p);
        break;
      case 0x8d: // BINUNICODE8
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        p += 8 + u32(b, p) + u32(b, p + 4) * 2 ** 32;
        break;
      default:
        throw new Error(`pickle-floor-child: opcode 0x${op.toString(16)} at offset ${p - 1} is not a binary-protocol opcode`);
    }
  }
  throw new Error(`pickle-floor-child: no STOP before the end (${len} bytes)`);
}

const t0 = performance.now();
const bytes = readFileSync(process.argv[2]);
const t1 = performance.now();
const opcodes = walk(bytes);
const t2 = performance.now();
console.log(JSON.stringify({ readMs: t1 - t0, walkMs: t2 - t1, opcodes }));

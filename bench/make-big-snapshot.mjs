// Makes large, realistic CUDA memory snapshots for bench/pickle.bench.mjs by replicating a real
// fixture (transformer_fullstep_trace: 1,010 segments, 19,770 trace events with C++ + Python
// stacks) until the file reaches a target size. Each replica gets its own segment, block, trace
// entry and frame-list objects (as PyTorch writes them: a new list per block/event) with shifted
// addresses and times, while frame dicts and strings stay shared through the pickle memo, exactly
// as in a real file. Emits opcodes directly (streaming), so a 1 GB file needs little memory.
//
// usage: node bench/make-big-snapshot.mjs SOURCE.pickle OUT.pickle TARGET_MB
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { readPickle, isTuple } from '../dist/torch/index.js';

const ADDRESS_SHIFT = 2 ** 36; // per replica; keeps addresses well below 2^53

class Emitter {
  constructor(path) {
    this.fd = openSync(path, 'w');
    this.buf = Buffer.allocUnsafe(1 << 24);
    this.len = 0;
    this.written = 0;
    this.memoCount = 0;
    this.strings = new Map();
    this.frames = new Map(); // original frame Map → memo index (shared across replicas)
  }
  flush() {
    writeSync(this.fd, this.buf, 0, this.len);
    this.written += this.len;
    this.len = 0;
  }
  ensure(n) {
    if (this.len + n > this.buf.length) this.flush();
  }
  op(...bytes) {
    this.ensure(bytes.length);
    for (const b of bytes) this.buf[this.len++] = b;
  }
  memoize() {
    this.op(0x94);
    return this.memoCount++;
  }
  get(i) {
    if (i < 256) this.op(0x68, i);
    else {
      this.ensure(5);
      this.buf[this.len++] = 0x6a;
      this.buf.writeUInt32LE(i, this.len);
      this.len += 4;
    }
  }
  str(s) {
    const known = this.strings.get(s);
    if (known !== undefined) return this.get(known);
    const bytes = Buffer.from(s, 'utf8');
    this.ensure(bytes.length + 5);
    if (bytes.length < 256) this.op(0x8c, bytes.length);
    else {
      this.buf[this.len++] = 0x58;
      this.buf.writeUInt32LE(bytes.length, this.len);
      this.len += 4;
    }
    bytes.copy(this.buf, this.len);
    this.len += bytes.length;
    this.strings.set(s, this.memoize());
  }
  int(v) {
    if (v >= 0 && v < 256) this.op(0x4b, v);
    else if (v >= 0 && v < 65536) this.op(0x4d, v & 0xff, v >> 8);
    else if (v >= -(2 ** 31) && v < 2 ** 31) {
      this.ensure(5);
      this.buf[this.len++] = 0x4a;
      this.buf.writeInt32LE(v, this.len);
      this.len += 4;
    } else {
      let x = BigInt(v);
      const out = [];
      for (;;) {
        out.push(Number(x & 0xffn));
        x >>= 8n;
        const sign = (out[out.length - 1] & 0x80) !== 0;
        if ((x === 0n && !sign) || (x === -1n && sign)) break;
      }
      this.op(0x8a, out.length, ...out);
    }
  }
  value(v) {
    if (v === null) return this.op(0x4e);
    if (v === true) return this.op(0x88);
    if (v === false) return this.op(0x89);
    if (typeof v === 'string') return this.str(v);
    if (typeof v === 'number') {
      if (Number.isInteger(v)) return this.int(v);
      this.ensure(9);
      this.buf[this.len++] = 0x47;
      this.buf.writeDoubleBE(v, this.len);
      this.len += 8;
      return;
    }
    if (isTuple(v) && v.length === 2) {
      this.value(v[0]);
      this.value(v[1]);
      this.op(0x86);
      this.memoize();
      return;
    }
    if (Array.isArray(v)) return this.list(v, (x) => this.value(x));
    if (v instanceof Map) return this.dict(v, (k, x) => this.value(x));
    throw new Error(`unexpected value ${typeof v}`);
  }
  list(items, each) {
    this.op(0x5d);
    this.memoize();
    for (let i = 0; i < items.length; i += 1000) {
      const end = Math.min(items.length, i + 1000);
      if (end - i > 1) this.op(0x28);
      for (let j = i; j < end; j++) each(items[j]);
      this.op(end - i > 1 ? 0x65 : 0x61);
    }
  }
  dict(map, each) {
    this.op(0x7d);
    this.memoize();
    this.op(0x28);
    for (const [k, x] of map) {
      this.str(k);
      each(k, x);
    }
    this.op(0x75);
  }
  frame(f) {
    const known = this.frames.get(f);
    if (known !== undefined) return this.get(known);
    this.op(0x7d);
    const index = this.memoize();
    this.op(0x28);
    for (const [k, x] of f) {
      this.str(k);
      this.value(x);
    }
    this.op(0x75);
    this.frames.set(f, index);
  }
  framesList(list, replicaLists) {
    const known = replicaLists.get(list);
    if (known !== undefined) return this.get(known);
    this.op(0x5d);
    replicaLists.set(list, this.memoize());
    if (list.length > 0) {
      for (let i = 0; i < list.length; i += 1000) {
        this.op(0x28);
        for (let j = i; j < Math.min(list.length, i + 1000); j++) this.frame(list[j]);
        this.op(0x65);
      }
    }
  }
  close() {
    this.flush();
    closeSync(this.fd);
  }
}

// `addressShift` separates the replicas' addresses: the default keeps the files the pickle bench has
// always measured; bench/allocator.bench.mjs passes 2^37, which exceeds the source's 1.31 × 2^36
// address span, so that the replicas never share an address and the whole file replays as one trace.
export function makeBigSnapshot(source, outPath, targetBytes, addressShift = ADDRESS_SHIFT) {
  const snap = readPickle(readFileSync(source));
  const segments = snap.get('segments');
  const trace = snap.get('device_traces')[0];
  const times = trace.map((e) => e.get('time_us'));
  const span = Math.max(...times) - Math.min(...times) + 1000;
  const sourceSize = readFileSync(source).length;
  const replicas = Math.max(1, Math.round(targetBytes / sourceSize));
  const e = new Emitter(outPath);
  e.op(0x80, 4);
  e.op(0x7d);
  e.memoize();
  e.op(0x28);
  const shifted = (r, m, lists) => (k, x) => {
    if (k === 'address' || k === 'addr') e.int(x + r * addressShift);
    else if (k === 'time_us') e.int(x + r * span);
    else if (k === 'frames') e.framesList(x, lists);
    else if (k === 'blocks') e.list(x, (b) => e.dict(b, shifted(r, b, lists)));
    else e.value(x);
  };
  e.str('segments');
  const allSegments = [];
  for (let r = 0; r < replicas; r++) for (const s of segments) allSegments.push([r, s]);
  const lists = [];
  for (let r = 0; r < replicas; r++) lists.push(new Map());
  e.list(allSegments, ([r, s]) => e.dict(s, shifted(r, s, lists[r])));
  e.str('device_traces');
  e.op(0x5d);
  e.memoize();
  e.op(0x28);
  const allEvents = [];
  for (let r = 0; r < replicas; r++) for (const ev of trace) allEvents.push([r, ev]);
  e.list(allEvents, ([r, ev]) => e.dict(ev, shifted(r, ev, lists[r])));
  e.op(0x65);
  for (const key of ['allocator_settings', 'external_annotations']) {
    if (snap.has(key)) {
      e.str(key);
      e.value(snap.get(key));
    }
  }
  e.op(0x75, 0x2e);
  e.close();
  return { replicas, bytes: e.written, segments: allSegments.length, events: allEvents.length };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [source, out, mb] = process.argv.slice(2);
  console.log(makeBigSnapshot(source, out, Number(mb) * 1e6));
}

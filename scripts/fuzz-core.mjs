// The fuzz harness's parts shared by `npm run fuzz` (scripts/fuzz.mjs, over the built readers in
// dist/) and the short seeded run in `npm test` (test/fuzz/readers.fuzz.test.ts, over src/): a
// seeded PRNG, the mutations, the seeds cut from real files, and the list of readers each kind of
// input goes through. The readers come in as `api`, so both runs drive the same code paths.

/** Seeded 32-bit PRNG (mulberry32): the same seed gives the same mutants on every machine. */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Opcodes and boundary bytes, so that byte mutations reach the pickle machine's and the lanes'
// edge cases (MARK, STOP, GETs and PUTs, FRAME, LONG4, STACK_GLOBAL, REDUCE, BUILD, EXT4, 0xFF…).
const INTERESTING_BYTES = [0x00, 0x01, 0x28, 0x2e, 0x30, 0x31, 0x32, 0x4a, 0x4b, 0x52, 0x58, 0x5d, 0x61, 0x62, 0x63, 0x65, 0x68, 0x6a, 0x71, 0x72, 0x75, 0x7d, 0x7f, 0x80, 0x81, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0xff];

// Text that JSON readers meet at their edges: odd numbers, wrong types, deep nesting, escapes.
const INTERESTING_TEXT = ['{', '}', '[', ']', '"', ',', ':', '\\', '0.5', '-1', '-0', '1e309', '9007199254740993', 'null', 'true', '""', '[]', '{}', '"\\u001b]0;x\\u0007"', '[[[[[[[[', '"[memory]"', '"Device Id"', '"Total Allocated"', '"traceEvents"', ' '.repeat(64)];

/**
 * One mutant of `src`: 1–4 edits, each a bit flip, a planted interesting byte, a deleted range, a
 * duplicated range (repeats opcodes, memo puts, marks), a huge length or memo index, a cut-off end,
 * or (for text) a planted JSON token.
 */
export function mutate(src, rand, text = false) {
  const pick = (n) => Math.floor(rand() * n);
  let b = Uint8Array.from(src);
  const edits = 1 + pick(4);
  for (let e = 0; e < edits && b.length > 0; e++) {
    const at = pick(b.length);
    switch (pick(text ? 8 : 7)) {
      case 0:
        b[at] ^= 1 << pick(8);
        break;
      case 1:
        b[at] = INTERESTING_BYTES[pick(INTERESTING_BYTES.length)];
        break;
      case 2: {
        const n = 1 + pick(16);
        b = concat(b.subarray(0, at), b.subarray(Math.min(b.length, at + n)));
        break;
      }
      case 3: {
        const n = 1 + pick(64);
        const end = Math.min(b.length, at + n);
        b = concat(b.subarray(0, end), b.subarray(at, end), b.subarray(end));
        break;
      }
      case 4: {
        // a 4-byte little-endian field set to something huge, zero or negative
        const v = [0xffffffff, 0x7fffffff, 0x80000000, 0x00ffffff, 0][pick(5)];
        for (let k = 0; k < 4 && at + k < b.length; k++) b[at + k] = (v >>> (8 * k)) & 0xff;
        break;
      }
      case 5:
        b = b.slice(0, at);
        break;
      case 6:
        b[at] = pick(256);
        break;
      case 7: {
        const token = new TextEncoder().encode(INTERESTING_TEXT[pick(INTERESTING_TEXT.length)]);
        b = concat(b.subarray(0, at), token, b.subarray(at + (pick(2) === 0 ? 0 : Math.min(token.length, b.length - at))));
        break;
      }
    }
  }
  return b;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * A Kineto trace cut down to a fuzzable size: its top-level keys, every `[memory]` event among
 * the first events and the first `keep` events of any kind (operators, kernels), as JSON text.
 */
export function cutTrace(text, keep = 1500) {
  const trace = JSON.parse(text);
  const events = Array.isArray(trace) ? trace : trace.traceEvents;
  const memory = [];
  const others = [];
  for (const e of events) {
    if (e && e.name === '[memory]') {
      if (memory.length < keep) memory.push(e);
    } else if (others.length < keep) others.push(e);
    if (memory.length >= keep && others.length >= keep) break;
  }
  const cut = [...others, ...memory].sort((x, y) => (x.ts ?? 0) - (y.ts ?? 0));
  if (Array.isArray(trace)) return JSON.stringify(cut);
  return JSON.stringify({ ...trace, traceEvents: cut });
}

/** An `export_memory_timeline` file as PyTorch writes it: [times, sizes by category]. */
export function timelineSeed() {
  const times = [];
  const sizes = [];
  for (let i = 0; i < 200; i++) {
    times.push(1_700_000_000_000_000 + i * 1000);
    sizes.push([0, i * 512, (i % 7) * 1024, 4096, 0, i % 3, 0, 0, 64 * i]);
  }
  return JSON.stringify([times, sizes]);
}

/**
 * The readers each kind of input goes through, over `api` (the functions of src/ or dist/).
 * Every reader either returns or throws; the harness calls whatever it throws that is not a
 * MemscopeError a crash.
 */
export function readersFor(api) {
  const decoder = new TextDecoder('utf-8');
  const text = (bytes) => decoder.decode(bytes);
  const snapshotViews = (snap) => {
    // What `stats` and `summary` compute from the model: the segment maps, frame labels.
    api.fragmentation(snap);
    for (let i = 0; i < Math.min(snap.frames.length, 200); i++) api.formatFrame(snap.frames[i]);
    return snap;
  };
  return {
    pickle: [
      { name: 'readSnapshot', run: (b) => snapshotViews(api.readSnapshot(b)) },
      { name: 'readSnapshotPieces', run: (b) => snapshotViews(api.readSnapshotPieces(api.readerOf(b), b.length, { pieceBytes: 1 << 12 })) },
      { name: 'normaliseSnapshot(readPickle)', run: (b) => snapshotViews(api.normaliseSnapshot(api.readPickle(b))) },
    ],
    trace: [{ name: 'readChromeTrace', run: (b) => api.readChromeTrace(text(b), { source: 'fuzz' }) }],
    timeline: [
      {
        name: 'readMemoryTimeline',
        run: (b) => {
          let value;
          try {
            value = JSON.parse(text(b));
          } catch (err) {
            // What readJsonTraceFile reports before the timeline reader runs.
            throw new api.MemscopeError('bad-json', `fuzz: not valid JSON (${err.message})`);
          }
          return api.readMemoryTimeline(value, 'fuzz');
        },
      },
    ],
    capture: [{ name: 'parseCapture+captureToReport', run: (b) => api.captureToReport(api.parseCapture(text(b), 'fuzz'), 'fuzz.ndjson') }],
  };
}

/**
 * Runs every reader of `kind` on `bytes`. Returns one outcome per reader: `result`, `error` (a
 * MemscopeError, with its code) or `crash` (anything else, with its message and stack).
 */
export function runReaders(readers, kind, bytes, isMemscopeError) {
  const out = [];
  for (const reader of readers[kind]) {
    const t = performance.now();
    let outcome;
    try {
      reader.run(bytes);
      outcome = { reader: reader.name, outcome: 'result' };
    } catch (err) {
      if (isMemscopeError(err)) outcome = { reader: reader.name, outcome: 'error', code: err.code, message: err.message };
      else outcome = { reader: reader.name, outcome: 'crash', message: String(err?.message ?? err), stack: String(err?.stack ?? '') };
    }
    outcome.ms = performance.now() - t;
    out.push(outcome);
  }
  return out;
}

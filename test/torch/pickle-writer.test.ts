import { describe, it, expect } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemscopeError } from '../../src/core/errors.js';
import { makeTuple, readPickle } from '../../src/torch/pickle/reader.js';
import { pyFloat, writePickle } from '../../src/torch/pickle/writer.js';
import { python } from './python.js';
import { fixture } from '../support/fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'memscope-writer-'));

/** The opcodes PyTorch's own snapshot files use (fixture README): memory_viz reads these. */
const SNAPSHOT_OPCODES = new Set(
  'PROTO FRAME MARK STOP EMPTY_DICT EMPTY_LIST TUPLE2 SETITEMS APPEND APPENDS BININT BININT1 BININT2 LONG1 BINFLOAT NEWFALSE SHORT_BINUNICODE BINUNICODE MEMOIZE BINGET LONG_BINGET'.split(
    ' ',
  ),
);

function opcodesOf(file: string): string[] {
  return JSON.parse(
    python(
      `import pickletools, sys, json\nprint(json.dumps(sorted({op.name for op, _, _ in pickletools.genops(open(sys.argv[1], 'rb').read())})))`.replace(
        'sys.argv[1]',
        JSON.stringify(file),
      ),
    ).toString(),
  );
}

describe('writePickle → python3 pickle.load', () => {
  it('writes values python reads back equal', () => {
    const value = new Map<unknown, unknown>([
      ['none', null],
      ['bools', [true, false]],
      ['ints', [0, 255, 256, 65535, 65536, -1, -(2 ** 31), 2 ** 31, 2 ** 53 - 1, -(2 ** 40)]],
      ['big', [2n ** 64n, -(2n ** 100n) + 3n, 2n ** 2100n]],
      ['floats', [0.5, -1e300, pyFloat(0), Infinity, -0]],
      ['strs', ['', 'a', 'é✓🚀', 'z'.repeat(70000)]],
      ['bytes', [new Uint8Array([0, 1, 255]), new Uint8Array(300).fill(7)]],
      ['tuples', [makeTuple([]), makeTuple([1]), makeTuple([1, 2]), makeTuple([1, 2, 3]), makeTuple([1, 2, 3, 4])]],
      ['sets', [new Set([1, 2]), Object.freeze(new Set(['x']))]],
      [7, { plain: 'object', skipped: undefined }],
      ['longlist', Array.from({ length: 2500 }, (_, i) => i)],
    ]);
    const file = join(dir, 'values.pickle');
    writeFileSync(file, writePickle(value));
    const expected = `{'none': None, 'bools': [True, False],
      'ints': [0, 255, 256, 65535, 65536, -1, -2**31, 2**31, 2**53 - 1, -2**40],
      'big': [2**64, -2**100 + 3, 2**2100], 'floats': [0.5, -1e300, 0.0, float('inf'), -0.0],
      'strs': ['', 'a', 'é✓🚀', 'z' * 70000], 'bytes': [b'\\x00\\x01\\xff', b'\\x07' * 300],
      'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], 'sets': [{1, 2}, frozenset({'x'})],
      7: {'plain': 'object'}, 'longlist': list(range(2500))}`;
    const out = python(
      `import pickle, math\nv = pickle.load(open(${JSON.stringify(file)}, 'rb'))\ne = ${expected}\nprint(v == e, type(v['floats'][2]).__name__, math.copysign(1, v['floats'][4]), type(v['tuples'][4]).__name__)`,
    ).toString();
    expect(out.trim()).toBe('True float -1.0 tuple');
  });

  it('keeps shared objects shared and round-trips cycles', () => {
    const frame = { name: 'f', filename: 'a.py', line: 3 };
    const frames = [frame, frame];
    const loop: unknown[] = [];
    loop.push(loop);
    const file = join(dir, 'shared.pickle');
    writeFileSync(file, writePickle({ a: frames, b: frames, loop }));
    const out = python(
      `import pickle\nv = pickle.load(open(${JSON.stringify(file)}, 'rb'))\nprint(v['a'] is v['b'], v['a'][0] is v['a'][1], v['loop'][0] is v['loop'])`,
    );
    expect(out.toString().trim()).toBe('True True True');
  });

  it('refuses values Python cannot hold, naming where', () => {
    expect(() => writePickle({ a: [1, undefined] })).toThrow(new MemscopeError('pickle-write', 'writePickle: undefined has no Python equivalent at .a[1]'));
    expect(() => writePickle({ f: () => 1 })).toThrow(/cannot write a function at \.f/);
    expect(() => writePickle({ d: new Date() })).toThrow(/cannot write a Date/);
    let deep: unknown[] = [];
    for (let i = 0; i < 50; i++) deep = [deep];
    expect(() => writePickle(deep, { maxDepth: 20 })).toThrow(/nesting deeper than 20/);
  });
});

describe('round trips through real PyTorch snapshots', () => {
  for (const name of ['small_3seg', 'state_only_259seg', 'older_no_settings_6633blocks', 'newest_format_trace', 'transformer_fullstep_trace']) {
    it(`${name}: memscope read → write → python reads an equal object using only snapshot opcodes`, () => {
      const original = fixture(`torch/${name}.pickle`);
      const copy = join(dir, `${name}.pickle`);
      const value = readPickle(readFileSync(original));
      writeFileSync(copy, writePickle(value));
      const out = python(
        `import pickle\na = pickle.load(open(${JSON.stringify(original)}, 'rb'))\nb = pickle.load(open(${JSON.stringify(copy)}, 'rb'))\nprint(a == b)`,
      );
      expect(out.toString().trim()).toBe('True');
      const extra = opcodesOf(copy).filter((op) => !SNAPSHOT_OPCODES.has(op));
      expect(extra).toEqual([]);
      // memscope reads its own output to the same value
      expect(readPickle(readFileSync(copy))).toEqual(value);
    });
  }
});

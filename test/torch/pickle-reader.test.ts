import { describe, it, expect } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { isTuple, readPickle, toPlain, type PickleValue } from '../../src/torch/pickle/reader.js';
import { python, pythonPickle } from './python.js';

const RICH = `{
  'none': None, 't': True, 'f': False,
  'small': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**31, 2**53 - 1, -(2**53 - 1)],
  'big': [2**53 + 1, -(2**64) - 7, 2**200],
  'float': [0.5, -1.25e300, float('inf')],
  'str': ['', 'ascii', 'héllo wörld ✓ 🚀', 'x' * 300],
  'bytes': b'\\x00\\xffabc', 'ba': bytearray(b'xyz'),
  'tuple': (1, ('a', 2.5), ()), 'set': {1, 2, 3}, 'frozen': frozenset({'q'}),
  'intkeys': {1: 'one', (2, 3): 'pair'},
}`;

function expectRich(v: PickleValue): void {
  expect(v).toBeInstanceOf(Map);
  const d = v as Map<PickleValue, PickleValue>;
  expect(d.get('none')).toBeNull();
  expect(d.get('t')).toBe(true);
  expect(d.get('f')).toBe(false);
  expect(d.get('small')).toEqual([0, 1, -1, 255, 256, 65535, 65536, -(2 ** 31), 2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1, -(2 ** 53 - 1)]);
  expect(d.get('big')).toEqual([2n ** 53n + 1n, -(2n ** 64n) - 7n, 2n ** 200n]);
  expect(d.get('float')).toEqual([0.5, -1.25e300, Infinity]);
  expect(d.get('str')).toEqual(['', 'ascii', 'héllo wörld ✓ 🚀', 'x'.repeat(300)]);
  expect(d.get('bytes')).toEqual(new Uint8Array([0, 255, 97, 98, 99]));
  expect(d.get('ba')).toEqual(new Uint8Array([120, 121, 122]));
  const tuple = d.get('tuple') as readonly PickleValue[];
  expect(isTuple(tuple)).toBe(true);
  expect(tuple).toEqual([1, ['a', 2.5], []]);
  expect(isTuple(tuple[1])).toBe(true);
  expect(d.get('set')).toEqual(new Set([1, 2, 3]));
  expect(Object.isFrozen(d.get('frozen'))).toBe(true);
  expect([...(d.get('frozen') as Set<PickleValue>)]).toEqual(['q']);
  const intkeys = d.get('intkeys') as Map<PickleValue, PickleValue>;
  expect(intkeys.get(1)).toBe('one');
  const [[, ], [pairKey, pairValue]] = [...intkeys];
  expect(pairKey).toEqual([2, 3]);
  expect(pairValue).toBe('pair');
}

describe('readPickle: data written by python3', () => {
  for (const protocol of [2, 3, 4, 5]) {
    it(`reads every plain-data type at protocol ${protocol}`, () => {
      expectRich(readPickle(pythonPickle(RICH, protocol)));
    });
  }

  it('keeps shared references shared and reads self-referencing lists as cycles', () => {
    const v = readPickle(pythonPickle('(lambda a: [a, a, {"k": a}])([1, 2])', 4)) as PickleValue[];
    expect(v[0]).toBe(v[1]);
    expect((v[2] as Map<PickleValue, PickleValue>).get('k')).toBe(v[0]);
    const cyc = readPickle(pythonPickle('x', 4, 'x = []\nx.append(x)')) as PickleValue[];
    expect(cyc[0]).toBe(cyc);
    expect(() => toPlain(cyc)).toThrow(MemscopeError);
  });

  it('toPlain gives JSON-ready values', () => {
    expect(JSON.stringify(toPlain(readPickle(pythonPickle("{'a': (1, 2**70), 3: b'ab'}", 4))))).toBe(
      '{"3":[97,98],"a":[1,"1180591620717411303424"]}',
    );
  });
});

function errorOf(fn: () => unknown): MemscopeError {
  try {
    fn();
  } catch (e) {
    if (e instanceof MemscopeError) return e;
    throw e;
  }
  throw new Error('expected a MemscopeError');
}

describe('readPickle: hostile and broken input', () => {
  it('refuses a pickle that would run os.system under Python, naming the global and offset', () => {
    const hostile = new Uint8Array(
      python(`
import pickle, os, sys
class Evil:
    def __reduce__(self):
        return (os.system, ('touch /tmp/memscope-pwned',))
sys.stdout.buffer.write(pickle.dumps({'segments': [Evil()]}, protocol=4))`),
    );
    const e = errorOf(() => readPickle(hostile));
    expect(e.code).toBe('pickle-unsafe');
    expect(e.message).toMatch(/pickle offset \d+: refusing STACK_GLOBAL \(0x93\) posix\.system/);
    // protocol 2 spells it with GLOBAL
    const p2 = new Uint8Array(python(`
import pickle, os, sys
class Evil:
    def __reduce__(self):
        return (os.system, ('true',))
sys.stdout.buffer.write(pickle.dumps([Evil()], protocol=2))`));
    expect(errorOf(() => readPickle(p2)).message).toMatch(/pickle offset 5: refusing GLOBAL \(0x63\) posix\.system/);
  });

  it('refuses object-building opcodes by name', () => {
    const cases: [string, RegExp][] = [
      ['\x80\x02N}b.', /pickle offset 4: refusing BUILD \(0x62\)/],
      ['\x80\x02(ios\nsystem\n.', /pickle offset 3: refusing INST \(0x69\) os\.system/],
      ['\x80\x02NN\x81.', /pickle offset 4: refusing NEWOBJ \(0x81\)/],
      ['\x80\x02\x82\x01.', /pickle offset 2: refusing EXT1 \(0x82\)/],
      ['\x80\x02N\x51.', /pickle offset 3: refusing BINPERSID \(0x51\)/],
      ['\x80\x02NNR.', /pickle offset 4: refusing REDUCE \(0x52\) of a non-global callable/],
    ];
    for (const [src, re] of cases) {
      const bytes = Uint8Array.from(src, (c) => c.charCodeAt(0));
      const e = errorOf(() => readPickle(bytes));
      expect(e.code).toBe('pickle-unsafe');
      expect(e.message).toMatch(re);
    }
  });

  it('reports truncation and corruption with the offset', () => {
    const good = pythonPickle("{'abc': [1, 2, 3]}", 4);
    const e = errorOf(() => readPickle(good.subarray(0, good.length - 1)));
    expect(e.code).toBe('pickle-truncated');
    expect(e.message).toMatch(/^pickle offset \d+: FRAME \(0x95\) of \d+ bytes runs past the end of the file/);
    expect(errorOf(() => readPickle(Uint8Array.of(0x80, 0x04, 0x8c, 0x09, 0x61))).message).toBe(
      'pickle offset 2: file ends inside SHORT_BINUNICODE (0x8c) (needs 9 more bytes, 1 left)',
    );
    expect(errorOf(() => readPickle(Uint8Array.of(0x80, 0x04, 0xff))).message).toBe(
      'pickle offset 2: unknown opcode 0xff is not a pickle opcode; the file is corrupt or not a pickle',
    );
    expect(errorOf(() => readPickle(Uint8Array.of(0x80, 0x04, 0x68, 0x07, 0x2e))).message).toBe(
      'pickle offset 2: memo entry 7 does not exist',
    );
    expect(errorOf(() => readPickle(new TextEncoder().encode('(lp0\nI1\na.'))).code).toBe('pickle-unsupported');
  });

  it('memo indices anywhere in 32 bits: far ones do not size the memo, near ones grow it, missing ones are named', () => {
    const le32 = (i: number) => [i & 0xff, (i >>> 8) & 0xff, (i >>> 16) & 0xff, i >>> 24];
    // [x, x, y, y] with x = ['far'] put at LONG_BINPUT 0xfffffff0 and y = 'near' at 5000 (past the
    // memo's first 1024 entries), each read back by LONG_BINGET: shared references stay shared.
    const far = 0xfffffff0;
    const shared = Uint8Array.from([
      0x80, 0x04, 0x5d, 0x28, // PROTO 4, EMPTY_LIST, MARK
      0x5d, 0x8c, 0x03, ...new TextEncoder().encode('far'), 0x61, 0x72, ...le32(far), // ['far'], LONG_BINPUT far
      0x6a, ...le32(far), // LONG_BINGET far
      0x8c, 0x04, ...new TextEncoder().encode('near'), 0x72, ...le32(5000), 0x6a, ...le32(5000),
      0x65, 0x2e, // APPENDS, STOP
    ]);
    const list = readPickle(shared) as PickleValue[];
    expect(list).toEqual([['far'], ['far'], 'near', 'near']);
    expect(list[0]).toBe(list[1]);
    expect(errorOf(() => readPickle(Uint8Array.of(0x80, 0x04, 0x6a, ...le32(far), 0x2e))).message).toBe(
      `pickle offset 2: memo entry ${far} does not exist`,
    );
  });

  it('refuses out-of-band buffers clearly', () => {
    expect(errorOf(() => readPickle(Uint8Array.of(0x80, 0x05, 0x97, 0x2e))).message).toMatch(/NEXT_BUFFER \(0x97\).*out-of-band/);
  });

  it('enforces limits on depth, container size and memory', () => {
    const deep = pythonPickle('x', 4, 'x = []\nfor _ in range(50): x = [x, 1]');
    expect(readPickle(deep)).toBeTruthy();
    const manyMarks = Uint8Array.from([0x80, 0x04, ...new Array(100).fill(0x28), 0x2e]);
    expect(errorOf(() => readPickle(manyMarks, { maxDepth: 50 })).message).toMatch(/more than 50 open MARKs/);
    const big = pythonPickle('list(range(1000))', 4);
    expect(errorOf(() => readPickle(big, { maxContainerItems: 999 })).code).toBe('pickle-limit');
    const text = pythonPickle("'x' * 100000", 4);
    expect(errorOf(() => readPickle(text, { maxBytes: 50_000 })).message).toMatch(/memory limit of 50000 bytes/);
  });
});

// Damaged or odd capture records: one MemscopeError naming the line and the
// field, never a TypeError from deep inside the reader.
import { describe, it, expect } from 'vitest';
import { parseCapture } from '../../src/capture/reader.js';
import { MemscopeError } from '../../src/core/errors.js';

const header = { format: 'memscope-capture', version: 1, created: 'x', argv: ['a.js'], backend: null, stacks: true, maxEntries: null, clock: 'ms' };
const end = '["e",9,{"events":0,"dropped":0,"exitCode":0,"error":null}]';

function parse(lines: string[], head: object = header): () => unknown {
  return () => parseCapture([JSON.stringify(head), ...lines, end].join('\n') + '\n', 'c.ndjson');
}

function errorOf(fn: () => unknown): MemscopeError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(MemscopeError);
    return err as MemscopeError;
  }
  throw new Error('expected a MemscopeError');
}

describe('capture reader robustness', () => {
  it('a stack record whose frames are not a list', () => {
    const err = errorOf(parse(['["k",1,5]']));
    expect(err.code).toBe('bad-capture');
    expect(err.message).toBe('c.ndjson: line 2: field 2 (frames) of a "k" record is not a list of string ids: ["k",1,5]');
  });

  it('a header whose argv is not a list of strings', () => {
    const err = errorOf(parse([], { ...header, argv: 5 }));
    expect(err.message).toBe('c.ndjson: line 1: header field "argv" is 5, expected a list of strings');
    expect(errorOf(parse([], { ...header, stacks: 'yes' })).message).toMatch(/header field "stacks" is "yes"/);
  });

  it('every record kind checks its fields', () => {
    const cases: [string, RegExp][] = [
      ['["s",1,2]', /line 2: field 2 \(text\) of a "s" record is not a string/],
      ['["a",1,2,3,"4",5,0,0,0,0,0]', /line 2: field 4 \(bytes\) of a "a" record is not a number/],
      ['["a",1,2,3,4,5,0,0,0,0]', /line 2: field 10 \(step\) of a "a" record is not a number/],
      ['["f",1,null]', /field 2 \(storage id\) of a "f" record/],
      ['["c",{},1]', /field 1 \(storage id\) of a "c" record/],
      ['["t",1,"x"]', /field 2 \(stack\) of a "t" record/],
      ['["p",1,1,[]]', /field 3 \(live bytes\) of a "p" record is not an object/],
      ['["m",1]', /field 2 \(kind\) of a "m" record/],
      ['["M",1,2,3]', /field 4 \(parent id\) of a "M" record/],
      ['["S",1,5]', /field 2 \(states\) of a "S" record is not an object/],
      ['["K",1,2,3,4]', /field 5 \(peak added\) of a "K" record/],
    ];
    for (const [line, message] of cases) expect(errorOf(parse([line])).message, line).toMatch(message);
    expect(errorOf(() => parseCapture(`${JSON.stringify(header)}\n["e",1,3]\n`, 'c.ndjson')).message).toMatch(/line 2: field 2 \(end info\) of a "e" record is not an object/);
  });

  it('alloc and free records read the same whether their numbers are plain or need full JSON', () => {
    const plain = parse(['["s",1,"cpu"]', '["a",1.5,7,1,16,0,0,0,0,0,3]', '["a",2.25,8,1,8,0,0,0,0,0,-1]', '["f",12345.678,7]'])() as ReturnType<typeof parseCapture>;
    const json = parse(['["s",1,"cpu"]', '["a",15e-1,7,1,1.6e1,0,0,0,0,0,3]', '["a", 2.25, 8, 1, 8, 0, 0, 0, 0, 0, -1]', '["f",1.2345678e4,7]'])() as ReturnType<typeof parseCapture>;
    for (const cap of [plain, json]) {
      expect(cap.allocs.toArray().map((a) => [a.t, a.id, a.device, a.bytes, a.step, a.freeT])).toEqual([
        [1.5, 7, 'cpu', 16, 3, 12345.678],
        [2.25, 8, 'cpu', 8, -1, null],
      ]);
    }
    // A number in the wrong place is refused whichever path reads it.
    expect(errorOf(parse(['["a",1,2,3,4,5,6,7,8,9,"x"]'])).message).toMatch(/field 10 \(step\) of a "a" record is not a number/);
    expect(errorOf(parse(['["a",1,2,3,4,5,6,7,8,9]'])).message).toMatch(/field 10 \(step\)/);
  });

  it('well-formed records of an unknown kind are skipped', () => {
    const cap = parse(['["z",1,2]', '["s",1,"cpu"]', '["a",1,7,1,16,0,0,0,0,0,0]'])() as ReturnType<typeof parseCapture>;
    expect(cap.allocs.toArray().map((a) => [a.id, a.bytes, a.device])).toEqual([[7, 16, 'cpu']]);
  });
});

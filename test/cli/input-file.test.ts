// The one wording of unusable input files (src/core/input-file.ts) that every verb and reader uses.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { describeContent, inFile, requireReadableFile } from '../../src/core/input-file.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

describe('describeContent: what a file looks like, from its first bytes', () => {
  it.each([
    ['', 'an empty file'],
    ['{"format":"memscope-capture","version":1}\n{"t":1}', 'a memscope capture (written by memscope run)'],
    ['{"schemaVersion": 1, "traceEvents": [', 'a Kineto trace (JSON)'],
    ['\ufeff  {"traceEvents": []}', 'a Kineto trace (JSON)'],
    ['[[0, 1], [[10, 20]]]', 'export_memory_timeline JSON'],
    ['{"name": "app"}', 'JSON'],
    ['\n\nhello there\nmore', 'text ("hello there")'],
    [`${'x'.repeat(60)}\n`, `text ("${'x'.repeat(40)}…")`],
    ['naïve café ☕', 'text ("naïve café ☕")'],
  ])('%j → %s', (text, expected) => {
    expect(describeContent(bytes(text))).toBe(expected);
  });

  it('pickles, gzip and binary data', () => {
    expect(describeContent(new Uint8Array([0x80, 0x04, 0x95, 0x00]))).toBe('a pickle');
    expect(describeContent(gzipSync(bytes('{"traceEvents": []}')))).toBe('gzip data');
    expect(describeContent(new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00]))).toBe('binary data');
    expect(describeContent(new Uint8Array([0xff, 0xfe, 0x00, 0x41, 0xc3, 0x28, 0x41, 0x41]))).toBe('binary data');
  });

  it('a multi-byte character cut by the end of the head is still text', () => {
    const cut = bytes('hello ☕').subarray(0, 8);
    expect(describeContent(cut)).toMatch(/^text \("hello /);
    // Wherever the head ends in a run of three- and four-byte characters, also three bytes or more
    // into one: a Kineto trace or capture naming a 層 or 😀 path near its 4 KiB is what it is.
    const run = bytes(`{"traceEvents": [{"name": "${'層😀'.repeat(40)}"}]}`);
    for (let n = 20; n < 120; n++) expect(describeContent(run.subarray(0, n)), `head of ${n} bytes`).toBe('a Kineto trace (JSON)');
  });
});

describe('requireReadableFile and inFile', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'memscope-input-file-'));
  const file = path.join(dir, 'ok.bin');
  writeFileSync(file, 'abc');

  function messageOf(read: () => unknown): string {
    try {
      read();
    } catch (err) {
      expect(err).toBeInstanceOf(MemscopeError);
      return (err as Error).message;
    }
    throw new Error('expected a throw');
  }

  it('returns the size of a readable file and names every other case in one wording', () => {
    expect(requireReadableFile(file)).toBe(3);
    expect(messageOf(() => requireReadableFile(dir))).toBe(`${dir}: is a directory`);
    expect(messageOf(() => requireReadableFile(path.join(dir, 'nope')))).toBe(`${path.join(dir, 'nope')}: no such file`);
    expect(messageOf(() => requireReadableFile(path.join(file, 'inside')))).toBe(`${path.join(file, 'inside')}: no such file (a part of the path is not a directory)`);
    expect(messageOf(() => requireReadableFile('/dev/null'))).toMatch(/^\/dev\/null: not a regular file/);
  });

  it('inFile puts the file name in front of memscope errors once, and leaves bugs alone', () => {
    const inner = new MemscopeError('bad-pickle', 'pickle: file ends before STOP at offset 3');
    const named = inFile('x.pickle', inner) as MemscopeError;
    expect([named.code, named.message]).toEqual(['bad-pickle', 'x.pickle: pickle: file ends before STOP at offset 3']);
    expect(inFile('x.pickle', named)).toBe(named);
    const bug = new TypeError('oops');
    expect(inFile('x.pickle', bug)).toBe(bug);
  });
});

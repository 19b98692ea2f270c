import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compileCacheDir } from '../../src/cli/compile-cache.js';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const tsx = path.join(repoRoot, 'node_modules/.bin/tsx');

/**
 * Runs `file` through runWithCompileCache in a fresh process (the cache is written at exit) and
 * returns the cache status and what the module's `answer()` returned.
 */
function runModule(file: string, cacheDir: string | null, variant?: string): { cache: string; answer: unknown; stderr: string } {
  const driver = `
    import { runWithCompileCache } from ${JSON.stringify(path.join(repoRoot, 'src/cli/compile-cache.ts'))};
    const m = runWithCompileCache(${JSON.stringify(file)}, { cacheDir: ${JSON.stringify(cacheDir)}, variant: ${JSON.stringify(variant)} });
    let answer;
    try { answer = m.exports.answer(); } catch (err) { answer = String(err.stack.split('\\n').slice(0, 2).join(' | ')); }
    console.log(JSON.stringify({ cache: m.cache, answer }));
  `;
  const r = spawnSync(tsx, ['--eval', driver], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`driver failed (${r.status}): ${r.stderr}`);
  return { ...(JSON.parse(r.stdout.trim().split('\n').pop()!) as { cache: string; answer: unknown }), stderr: r.stderr };
}

/** A CommonJS module whose answer comes from a function that is only compiled when called. */
const moduleSource = (word: string): string =>
  [
    `'use strict';`,
    `function inner(n) { return ${JSON.stringify(word)} + ':' + n; }`,
    `exports.answer = () => inner(__filename.endsWith('.cjs') ? 1 : 0) + ':' + typeof require('node:path').join;`,
    `exports.fails = () => { throw new Error('from line 4'); };`,
    '',
  ].join('\n');

describe('runWithCompileCache (src/cli/compile-cache.ts)', () => {
  it('compiles without a cache, writes one at exit, and runs from it after; an edited file never meets the old cache', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-cc-'));
    const cacheDir = path.join(dir, 'cache');
    const file = path.join(dir, 'mod.cjs');
    writeFileSync(file, moduleSource('alpha'));

    expect(runModule(file, cacheDir, 'summary')).toMatchObject({ cache: 'miss', answer: 'alpha:1:function' });
    const written = readdirSync(cacheDir);
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(new RegExp(`^mod\\.cjs\\.\\w+\\.summary\\.${statSync(file).size}-\\d+\\.${process.version.replace(/\./g, '\\.')}-${process.arch}\\.v8cache$`));
    expect(runModule(file, cacheDir, 'summary')).toMatchObject({ cache: 'hit', answer: 'alpha:1:function' });
    // Another variant of the same file keeps its own cache.
    expect(runModule(file, cacheDir, 'stats')).toMatchObject({ cache: 'miss' });
    expect(readdirSync(cacheDir)).toHaveLength(2);

    // Same length, other content, a later modification time: V8 alone would take the old cache
    // (it checks only the source's length) and run the old code.
    writeFileSync(file, moduleSource('omega'));
    const later = new Date(statSync(file).mtimeMs + 5000);
    utimesSync(file, later, later);
    expect(runModule(file, cacheDir, 'summary')).toMatchObject({ cache: 'miss', answer: 'omega:1:function' });
    expect(runModule(file, cacheDir, 'summary')).toMatchObject({ cache: 'hit', answer: 'omega:1:function' });
    // The edited file's cache replaced the old one of its variant; the other variant's stays.
    const after = readdirSync(cacheDir).sort();
    expect(after).toHaveLength(2);
    expect(after.filter((n) => n.includes('.summary.'))).toHaveLength(1);
    expect(after.filter((n) => n.includes('.summary.'))[0]).not.toBe(written[0]);
  }, 60_000);

  it('a corrupt cache is rejected by V8 and rewritten; an unwritable directory or none at all only means compiling', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-cc-'));
    const cacheDir = path.join(dir, 'cache');
    const file = path.join(dir, 'mod.cjs');
    writeFileSync(file, moduleSource('beta'));
    runModule(file, cacheDir);
    const [name] = readdirSync(cacheDir);
    const cacheFile = path.join(cacheDir, name!);
    const bytes = readFileSync(cacheFile);
    for (let i = 0; i < bytes.length; i += 7) bytes[i] ^= 0x5a;
    writeFileSync(cacheFile, bytes);
    expect(runModule(file, cacheDir)).toMatchObject({ cache: 'rejected', answer: 'beta:1:function' });
    expect(runModule(file, cacheDir)).toMatchObject({ cache: 'hit', answer: 'beta:1:function' });
    // A file of that name that is no cache at all (empty) is rejected the same way.
    writeFileSync(cacheFile, '');
    expect(runModule(file, cacheDir)).toMatchObject({ cache: 'rejected', answer: 'beta:1:function' });

    // The cache directory's place is taken by a file: nothing can be read or written there.
    const blocked = path.join(dir, 'blocked');
    writeFileSync(blocked, 'not a directory');
    for (let i = 0; i < 2; i++) expect(runModule(file, path.join(blocked, 'cache'))).toMatchObject({ cache: 'miss', answer: 'beta:1:function', stderr: '' });
    expect(runModule(file, null)).toMatchObject({ cache: 'off', answer: 'beta:1:function' });
  }, 60_000);

  it('keeps line numbers in stack traces, and takes only plain variant names', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-cc-'));
    const file = path.join(dir, 'mod.cjs');
    writeFileSync(file, moduleSource('gamma').replace('exports.answer = () =>', 'exports.answer = () => exports.fails() ||'));
    const cacheDir = path.join(dir, 'cache');
    const first = runModule(file, cacheDir, '../escape');
    expect(first.answer).toMatch(/^Error: from line 4 \| +at (Object\.)?exports\.fails .*mod\.cjs:4:\d+\)?$/);
    expect(readdirSync(cacheDir)).toEqual([expect.stringMatching(/^mod\.cjs\.\w+\.default\./)]);
    expect(runModule(file, cacheDir, '../escape')).toMatchObject({ cache: 'hit', answer: first.answer });
  }, 60_000);

  it('a cache directory that cannot be made (under /proc) costs the cache, never the command: it ends at once', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-cc-'));
    const file = path.join(dir, 'proc.cjs');
    writeFileSync(file, moduleSource('delta'));
    // Node's own recursive mkdir spins for ever there; bounded here so that a hang fails.
    const driver = `
      import { runWithCompileCache } from ${JSON.stringify(path.join(repoRoot, 'src/cli/compile-cache.ts'))};
      const m = runWithCompileCache(${JSON.stringify(file)}, { cacheDir: '/proc/memscope-no-such/cache' });
      console.log(m.exports.answer());
    `;
    const r = spawnSync(tsx, ['--eval', driver], { encoding: 'utf8', timeout: 30_000 });
    expect({ status: r.status, signal: r.signal, out: r.stdout.trim() }).toEqual({ status: 0, signal: null, out: 'delta:1:function' });
  }, 60_000);

  it('compileCacheDir: MEMSCOPE_COMPILE_CACHE names the directory or turns it off; else XDG_CACHE_HOME, else ~/.cache', () => {
    expect(compileCacheDir({ MEMSCOPE_COMPILE_CACHE: '/x/y' })).toBe('/x/y');
    expect(compileCacheDir({ MEMSCOPE_COMPILE_CACHE: 'off', XDG_CACHE_HOME: '/c' })).toBeNull();
    expect(compileCacheDir({ MEMSCOPE_COMPILE_CACHE: '0' })).toBeNull();
    expect(compileCacheDir({ XDG_CACHE_HOME: '/c' })).toBe(path.join('/c', 'memscope', 'compile-cache'));
    expect(compileCacheDir({})).toMatch(/[/\\]\.cache[/\\]memscope[/\\]compile-cache$/);
  });
});

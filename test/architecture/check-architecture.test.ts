/**
 * The import-rule checker (scripts/check-architecture.mjs) on small hand-made trees, so each
 * rule is shown to fail when it should; the real src/ is checked in architecture.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkArchitecture, DEFAULT_RULES, folderGraph, LONG_FILE_EXCEPTIONS, formatViolations, importsOf, type Rules } from '../../scripts/check-architecture.mjs';
import { repoRoot } from '../support/fixtures.js';

let made: string[] = [];
afterEach(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made = [];
});

/** A temporary src/ holding `files` (path → text). */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'memscope-arch-'));
  made.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

/** The real rules without the real tree's long-file exceptions (whose files a hand-made tree lacks). */
const RULES: Rules = { ...DEFAULT_RULES, longFileExceptions: {} };

function check(src: string, rules: Rules = RULES) {
  return checkArchitecture(src, rules);
}

function lines(n: number): string {
  return Array.from({ length: n }, (_, i) => `export const v${i} = ${i};\n`).join('');
}

/** A tree that keeps every rule: one file per layer, each importing the layer below. */
const CLEAN: Record<string, string> = {
  'core/units.ts': 'export const KiB = 1024;\n',
  'render/table.ts': "import { KiB } from '../core/units.js';\nexport const width = KiB;\n",
  'torch/snapshot.ts': "import { width } from '../render/table.js';\nexport const s = width;\n",
  'capture/reader.ts': "import type { KiB } from '../core/units.js';\nexport type R = typeof KiB;\n",
  'allocator/replay.ts': "export * from '../torch/snapshot.js';\n",
  'tracking/mem.ts': "import { s } from '../torch/snapshot.js';\nexport const m = s;\n",
  'analysis/profile.ts': "import { m } from '../core/units.js';\n".replace('m }', 'KiB as m }') + 'export const p = m;\n',
  'tfjs/adapter.ts': "export async function load() { return import('../tracking/mem.js'); }\n",
  'viewer/html.ts': "export type T = typeof import('../analysis/profile.js');\n",
  'cli/main.ts': "import '../viewer/html.js';\nimport { load } from '../tfjs/adapter.js';\nvoid load;\n",
  'index.ts': "export * from './cli/main.js';\nexport * from './core/units.js';\n",
};

describe('reading imports', () => {
  it('counts every import form, marks type-only ones, and ignores comments and strings', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from './b.js';",
      "import { type C, type D } from './c.js';",
      "import { type E, f } from './e.js';",
      "export * from './g.js';",
      "export type { H } from './h.js';",
      "import i = require('./i.js');",
      "const j = await import('./j.js');",
      'const k = await import(`./k.js`);',
      "let l: typeof import('./l.js');",
      "import './m.js';",
      "// import { x } from './comment.js';",
      "const s = \"import { y } from './string.js'\";",
      'const t = await import(someVariable);',
      "import { readFileSync } from 'node:fs';",
      "export { type N, type O } from './n.js';",
      "export { p, type Q } from './p.js';",
    ].join('\n');
    expect(importsOf('x.ts', text)).toEqual([
      { specifier: './a.js', typeOnly: false, line: 1 },
      { specifier: './b.js', typeOnly: true, line: 2 },
      { specifier: './c.js', typeOnly: true, line: 3 },
      { specifier: './e.js', typeOnly: false, line: 4 },
      { specifier: './g.js', typeOnly: false, line: 5 },
      { specifier: './h.js', typeOnly: true, line: 6 },
      { specifier: './i.js', typeOnly: false, line: 7 },
      { specifier: './j.js', typeOnly: false, line: 8 },
      { specifier: './k.js', typeOnly: false, line: 9 },
      { specifier: './l.js', typeOnly: true, line: 10 },
      { specifier: './m.js', typeOnly: false, line: 11 },
      { specifier: 'node:fs', typeOnly: false, line: 15 },
      { specifier: './n.js', typeOnly: true, line: 16 },
      { specifier: './p.js', typeOnly: false, line: 17 },
    ]);
  });
});

describe('the checker on hand-made trees', () => {
  it('passes a tree that keeps every rule, with every import in its graph', () => {
    const result = check(tree(CLEAN));
    expect(result.violations).toEqual([]);
    expect(result.files).toHaveLength(11);
    expect(result.edges.map((e) => `${e.from} -> ${e.to}`).sort()).toEqual([
      'allocator/replay.ts -> torch/snapshot.ts',
      'analysis/profile.ts -> core/units.ts',
      'capture/reader.ts -> core/units.ts',
      'cli/main.ts -> tfjs/adapter.ts',
      'cli/main.ts -> viewer/html.ts',
      'index.ts -> cli/main.ts',
      'index.ts -> core/units.ts',
      'render/table.ts -> core/units.ts',
      'tfjs/adapter.ts -> tracking/mem.ts',
      'torch/snapshot.ts -> render/table.ts',
      'tracking/mem.ts -> torch/snapshot.ts',
      'viewer/html.ts -> analysis/profile.ts',
    ]);
    expect(formatViolations(result.violations)).toBe('no violations');
  });

  it('draws the import graph between folders, lowest importer first', () => {
    const src = tree({ ...CLEAN, 'tracking/more.ts': "import '../torch/snapshot.js';\nimport '../core/units.js';\n" });
    expect(folderGraph(check(src).edges).map(({ from, to, imports }) => `${from} -> ${to}: ${imports}`)).toEqual([
      'render -> core: 1',
      'capture -> core: 1',
      'torch -> render: 1',
      'allocator -> torch: 1',
      'analysis -> core: 1',
      'tracking -> torch: 2',
      'tracking -> core: 1',
      'tfjs -> tracking: 1',
      'viewer -> analysis: 1',
      'cli -> tfjs: 1',
      'cli -> viewer: 1',
      'index.ts -> cli: 1',
      'index.ts -> core: 1',
    ]);
  });

  it('reports an import circle with its files in order, type-only imports included', () => {
    const src = tree({
      ...CLEAN,
      'torch/a.ts': "import { b } from './b.js';\nexport const a = b;\n",
      'torch/b.ts': "import type { C } from './c.js';\nexport const b = 1 as C;\n",
      'torch/c.ts': "import { a } from './a.js';\nexport type C = typeof a;\n",
    });
    const { violations } = check(src);
    expect(violations).toEqual([
      {
        rule: 'cycle',
        files: ['torch/a.ts', 'torch/b.ts', 'torch/c.ts'],
        message: 'import circle: src/torch/a.ts -> src/torch/b.ts -(type)-> src/torch/c.ts -> src/torch/a.ts',
      },
    ]);
  });

  it('reports a circle made only of type imports, and a file importing itself', () => {
    const src = tree({
      ...CLEAN,
      'core/x.ts': "import type { Y } from './y.js';\nexport interface X { y: Y }\n",
      'core/y.ts': "import type { X } from './x.js';\nexport interface Y { x: X }\n",
      'core/self.ts': "export type { Z } from './self.js';\nexport interface Z {}\n",
    });
    const messages = check(src).violations.map((v) => v.message);
    expect(messages).toEqual([
      'import circle: src/core/self.ts -(type)-> src/core/self.ts',
      'import circle: src/core/x.ts -(type)-> src/core/y.ts -(type)-> src/core/x.ts',
    ]);
  });

  it('covers every file of a tangle with the shortest circles through them', () => {
    const src = tree({
      'core/a.ts': "import './b.js';\nimport './c.js';\n",
      'core/b.ts': "import './a.js';\n",
      'core/c.ts': "import './d.js';\n",
      'core/d.ts': "import './a.js';\n",
    });
    const messages = check(src).violations.map((v) => v.message);
    expect(messages).toHaveLength(2);
    expect(messages[0]).toMatch(/^import circle: src\/core\/a\.ts -> src\/core\/b\.ts -> src\/core\/a\.ts \(one of the circles among 4 files: /);
    expect(messages[1]).toMatch(/^import circle: src\/core\/c\.ts -> src\/core\/d\.ts -> src\/core\/a\.ts -> src\/core\/c\.ts /);
  });

  it('reports an upward import, an import between peers, and render importing a model', () => {
    const src = tree({
      ...CLEAN,
      'torch/up.ts': "import { m } from '../tracking/mem.js';\nexport const up = m;\n",
      'torch/side.ts': "import type { R } from '../capture/reader.js';\nexport type S = R;\n",
      'core/up.ts': "import { width } from '../render/table.js';\nexport const w = width;\n",
      'render/model.ts': "import { s } from '../torch/snapshot.js';\nexport const x = s;\n",
    });
    const { violations } = check(src);
    expect(violations.map((v) => [v.rule, v.message])).toEqual([
      ['layer', 'src/core/up.ts:1 imports src/render/table.ts: an upward import — core/ is the lowest layer and imports no other folder'],
      ['layer', 'src/torch/side.ts:1 imports src/capture/reader.ts (type only): torch/ and capture/ are on the same layer, and folders on one layer do not import each other'],
      ['layer', 'src/torch/up.ts:1 imports src/tracking/mem.ts: an upward import — torch/ imports only core/, render/'],
      ['render', 'src/render/model.ts:1 imports src/torch/snapshot.ts: render/ imports only core/ (renderers take plain data, not a model)'],
    ]);
  });

  it('reports an import of an entry point, a stray file in src/, a folder outside the table and a name that resolves to nothing', () => {
    const src = tree({
      ...CLEAN,
      'cli/back.ts': "import '../index.js';\n",
      'helpers.ts': 'export const h = 1;\n',
      'report/text.ts': "import { m } from '../tracking/mem.js';\nexport const t = m;\n",
      'tracking/uses-report.ts': "import { t } from '../report/text.js';\nexport const u = t;\n",
      'core/missing.ts': "import { gone } from './gone.js';\nexport const g = gone;\n",
    });
    const messages = check(src).violations.map((v) => v.message);
    expect(messages).toEqual([
      "src/core/missing.ts:1 imports './gone.js', which names no file in src/",
      'src/cli/back.ts:1 imports src/index.ts: the entry points are on top, nothing in src/ imports them',
      'src/helpers.ts sits directly in src/ but is not an entry point (index.ts, node.ts): move it into a layer folder',
      'src/report/ is in no layer of the table (core → render → torch, capture → allocator, tracking, analysis → tfjs, viewer, webgpu → cli): add it to docs/ARCHITECTURE.md and scripts/check-architecture.mjs, or move its files into a layer',
      'folder circle: report/ -> tracking/ -> report/ (src/report/text.ts imports src/tracking/mem.ts; src/tracking/uses-report.ts imports src/report/text.ts)',
    ]);
  });

  it('reports a file over the line limit, and not one at the limit', () => {
    const src = tree({ ...CLEAN, 'torch/at-limit.ts': lines(600), 'torch/long.ts': lines(601) });
    expect(check(src).violations.map((v) => v.message)).toEqual(['src/torch/long.ts has 601 lines (limit 600): split it by concern']);
  });

  it('lets an exempt port past the limit only while its functions stay short, and reports a stale exemption', () => {
    const shortFunctions = Array.from({ length: 40 }, (_, i) => `export function f${i}(x: number): number {\n${'  x += 1;\n'.repeat(15)}  return x;\n}\n`).join('');
    const longFunction = `export function giant(x: number): number {\n${'  x += 1;\n'.repeat(70)}  return x;\n}\n`;
    const rules: Rules = {
      ...DEFAULT_RULES,
      longFileExceptions: { 'allocator/port.ts': 'port of a.cpp', 'allocator/giant.ts': 'port of b.cpp', 'allocator/small.ts': 'port of c.cpp', 'allocator/gone.ts': 'port of d.cpp' },
    };
    const src = tree({ ...CLEAN, 'allocator/port.ts': shortFunctions, 'allocator/giant.ts': shortFunctions + longFunction, 'allocator/small.ts': lines(10) });
    expect(check(src, rules).violations.map((v) => v.message)).toEqual([
      'LONG_FILE_EXCEPTIONS names src/allocator/gone.ts, which does not exist: drop it',
      'src/allocator/giant.ts is exempt from the 600-line limit as a port of b.cpp, but its function giant (line 721) spans 73 lines (an exempt port keeps every function within 60)',
      'src/allocator/small.ts is exempt from the 600-line limit (port of c.cpp) but has 10 lines: drop it from LONG_FILE_EXCEPTIONS',
    ]);
  });

  it('runs from the command line with the real rules: a numbered list and exit code 1 on violations, exit code 0 on a clean tree', () => {
    const script = join(repoRoot, 'scripts/check-architecture.mjs');
    // The real exceptions' files, long and made of short functions, so the real rules accept them.
    const ports = Object.fromEntries(Object.keys(LONG_FILE_EXCEPTIONS).map((path) => [path, Array.from({ length: 70 }, (_, i) => `export function f${i}(): number {\n${'  void 0;\n'.repeat(8)}  return ${i};\n}\n`).join('')]));
    const bad = spawnSync(process.execPath, [script, tree({ ...CLEAN, ...ports, 'core/up.ts': "import '../cli/main.js';\n", 'torch/long.ts': lines(700) })], { encoding: 'utf8' });
    expect(bad.status).toBe(1);
    expect(bad.stdout).toContain('2 architecture violation(s):');
    expect(bad.stdout).toContain('  1. src/core/up.ts:1 imports src/cli/main.ts: an upward import');
    expect(bad.stdout).toContain('  2. src/torch/long.ts has 700 lines (limit 600)');
    const good = spawnSync(process.execPath, [script, tree({ ...CLEAN, ...ports }), '--graph'], { encoding: 'utf8' });
    expect(good.stderr).toBe('');
    expect(good.stdout).toMatch(/^13 files, 12 imports under .*\nno violations\nfolder imports \(importer -> imported: import statements\):\n  render -> core: 1\n/);
    expect(good.stdout).toContain('\n  index.ts -> core: 1\n');
    expect(good.status).toBe(0);
  });
});

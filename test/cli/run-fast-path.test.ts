// `memscope run`'s fast path (src/cli/run-child.ts, src/cli/bin.ts): the bin reads plainly right
// arguments itself and starts the program before commander or any verb loads; every other
// argument list goes through commander, which words the mistake in one line.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parseCapture } from '../../src/capture/reader.js';
import { parseRunArgs } from '../../src/cli/run-child.js';
import { repoRoot } from '../support/fixtures.js';

vi.setConfig({ testTimeout: 120_000 });

const work = mkdtempSync(path.join(tmpdir(), 'memscope-run-fast-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// A program that reports what it was given and exits with the code it is asked for.
const program = path.join(work, 'echo.mjs');
writeFileSync(
  program,
  [
    `const at = process.argv.indexOf('--exit');`,
    `const code = at > 0 ? Number(process.argv[at + 1]) : 0;`,
    `console.log(JSON.stringify({ argv: process.argv.slice(2), preload: process.execArgv.some((a) => a.includes('run-preload')) }));`,
    `process.exitCode = code;`,
    '',
  ].join('\n'),
);
mkdirSync(path.join(work, 'a-directory'));

describe('parseRunArgs', () => {
  it('reads every option of `run` in both spellings, then the script, then the program\'s arguments untouched', () => {
    expect(parseRunArgs(['-q', '--stacks', '-o', 'out.ndjson', '--max-entries', '12', '--backend', 'wasm', '--json', program, '--steps', '3', '-o', 'theirs'])).toEqual({
      script: program,
      args: ['--steps', '3', '-o', 'theirs'],
      opts: { quiet: true, stacks: true, output: 'out.ndjson', maxEntries: 12, backend: 'wasm', json: true },
    });
    expect(parseRunArgs(['--quiet', '--output=x.ndjson', '--max-entries=0', program])).toEqual({ script: program, args: [], opts: { quiet: true, output: 'x.ndjson', maxEntries: 0 } });
    expect(parseRunArgs([program])).toEqual({ script: program, args: [], opts: {} });
  });

  it.each([
    ['help', ['--help', program]],
    ['an unknown option', ['--stack', program]],
    ['short options run together', ['-qo', 'x.ndjson', program]],
    ['a flag given a value', ['--json=yes', program]],
    ['a bad --max-entries', ['--max-entries', '-3', program]],
    ['a fractional --max-entries', ['--max-entries', '1.5', program]],
    ['an option missing its value', ['-o']],
    ['an option value that looks like an option', ['-o', '--stacks', program]],
    ['no script', ['-q']],
    ['a script that does not exist', [path.join(work, 'missing.mjs')]],
    ['a directory for a script', [path.join(work, 'a-directory')]],
    ['`--` before the script', ['--', program]],
  ])('leaves %s to commander (null)', (_what, argv) => {
    expect(parseRunArgs(argv)).toBeNull();
  });
});

/** Runs `bin` (the built one unless given) in `work`. */
function memscope(args: string[], bin = path.join(repoRoot, 'dist/cli/memscope.cjs')) {
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run \`npm run build\` first (npm test does)`);
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: work, encoding: 'utf8', env: { ...process.env, MEMSCOPE_COMPILE_CACHE: 'off', NO_COLOR: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('memscope run through the built bin', () => {
  it('starts the program without commander, the verb registry or the CLI bundle', () => {
    // A copy of dist/ without them: the fast path still runs the program and writes the capture.
    const dist = path.join(work, 'dist');
    cpSync(path.join(repoRoot, 'dist'), dist, { recursive: true });
    rmSync(path.join(dist, 'cli/commands'), { recursive: true });
    rmSync(path.join(dist, 'cli/memscope-cli.cjs'));
    rmSync(path.join(dist, 'cli/cli.js'));
    const out = path.join(work, 'no-cli.ndjson');
    const r = memscope(['run', '-q', '--stacks', '--max-entries', '7', '-o', out, program, '--exit', '5', '-q'], path.join(dist, 'cli/memscope.cjs'));
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 5, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ argv: ['--exit', '5', '-q'], preload: true });
    const capture = parseCapture(readFileSync(out, 'utf8'), out);
    expect(capture.header).toMatchObject({ argv: [program, '--exit', '5', '-q'], stacks: true, maxEntries: 7, backend: null });
    expect(capture.end).toMatchObject({ exitCode: 5 });
  });

  it('says where the capture went unless -q, and defaults its name to the script\'s', () => {
    const r = memscope(['run', 'echo.mjs']);
    expect(r.status).toBe(0);
    const written = /^memscope: capture written to (.+\/memscope-echo\.\d+\.capture\.ndjson)\n {2}next: memscope report \1 -o report\.html · memscope leaks \1\n$/.exec(r.stderr);
    expect(written, r.stderr).not.toBeNull();
    expect(parseCapture(readFileSync(written![1]!, 'utf8')).header.argv).toEqual([program]);
  });

  it('--json: the program\'s stdout goes to stderr and stdout holds the report alone', () => {
    const out = path.join(work, 'json.ndjson');
    const r = memscope(['run', '--json', '-o', out, program, '--exit', '4']);
    expect(r.status).toBe(4);
    expect(JSON.parse(r.stdout)).toMatchObject({ exitCode: 4, capture: out, steps: 0, leaks: [] });
    expect(JSON.parse(r.stderr)).toEqual({ argv: ['--exit', '4'], preload: true });
  });

  it('--json on a capture that cannot be read: one line and exit 1', () => {
    // The program deletes its own capture, so the report after it finds no file to read.
    const out = path.join(work, 'deleted.ndjson');
    const spoiler = path.join(work, 'delete-capture.mjs');
    writeFileSync(spoiler, `import { rmSync } from 'node:fs';\nrmSync(${JSON.stringify(out)});\n`);
    const r = memscope(['run', '--json', '-o', out, spoiler]);
    expect(r.stdout).toBe('');
    expect({ status: r.status, lines: r.stderr.trim().split('\n') }).toEqual({ status: 1, lines: [`memscope: ${out}: no such file`] });
  });

  it.each([
    [['run', '--max-entries', 'many', 'echo.mjs'], 2, /^memscope: --max-entries must be a non-negative integer, got "many" \(see memscope run --help\)$/],
    [['run', '--stack', 'echo.mjs'], 2, /^memscope: unknown option '--stack' \(Did you mean --stacks\?\) \(see memscope run --help\)$/],
    [['run'], 2, /^memscope: missing required argument 'script' \(see memscope run --help\)$/],
    [['run', 'missing.mjs'], 1, /^memscope: missing\.mjs: no such file$/],
    [['run', 'a-directory'], 1, /^memscope: a-directory: is a directory$/],
  ])('what the fast path leaves to commander still gets one line: %j', (args, status, line) => {
    const r = memscope(args);
    expect({ status: r.status, lines: r.stderr.trim().split('\n') }).toEqual({ status, lines: [expect.stringMatching(line)] });
    expect(r.stdout).toBe('');
  });
});

// The option readers every verb uses (src/cli/options.ts) and where their errors end up: exit 2
// through runCli, while a bug is one line and exit 1.
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/cli.js';
import { byteSize, choice, isUsageError, nonNegativeInt, positiveInt, usageOf } from '../../src/cli/options.js';
import { MemscopeError } from '../../src/core/errors.js';

function thrown(read: () => unknown): unknown {
  try {
    read();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('option readers', () => {
  it('integers: digits only; the lower bound is part of the name', () => {
    expect(nonNegativeInt('0', '--top')).toBe(0);
    expect(nonNegativeInt('42', '--top')).toBe(42);
    expect(positiveInt('1', '--steps')).toBe(1);
    for (const bad of ['-3', '1.5', '1e3', 'abc', '', ' ', '0x10', '99999999999999999999']) {
      const err = thrown(() => nonNegativeInt(bad, '--top'));
      expect({ bad, usage: isUsageError(err), message: (err as Error).message }).toEqual({
        bad,
        usage: true,
        message: `--top must be a non-negative integer, got ${JSON.stringify(bad)}`,
      });
    }
    expect((thrown(() => positiveInt('0', '--steps')) as Error).message).toBe('--steps must be a positive integer, got "0"');
  });

  it('sizes: binary units in any spelling, or plain bytes', () => {
    expect(byteSize('24GiB', '--capacity')).toBe(24 * 1024 ** 3);
    expect(byteSize('512MiB', '--capacity')).toBe(512 * 1024 ** 2);
    expect(byteSize('512mb', '--capacity')).toBe(512 * 1024 ** 2);
    expect(byteSize('16G', '--capacity')).toBe(16 * 1024 ** 3);
    expect(byteSize('1.5 GiB', '--capacity')).toBe(1.5 * 1024 ** 3);
    expect(byteSize('17179869184', '--capacity')).toBe(17179869184);
    expect(byteSize('4KiB', '--capacity')).toBe(4096);
    for (const bad of ['lots', '24 GiBs', '-1GiB', 'GiB', '']) {
      const err = thrown(() => byteSize(bad, '--capacity'));
      expect({ bad, usage: isUsageError(err), message: (err as Error).message }).toEqual({
        bad,
        usage: true,
        message: `--capacity must be a size in bytes such as 24GiB, 512MiB or 17179869184, got ${JSON.stringify(bad)}`,
      });
    }
    expect((thrown(() => byteSize('0.1', '--capacity')) as Error).message).toBe('--capacity must be a positive size, got "0.1"');
  });

  it('choices, and MemscopeErrors of other readers turned into usage errors', () => {
    expect(choice('KiB', '--units', ['B', 'KiB'] as const)).toBe('KiB');
    expect((thrown(() => choice('kib', '--units', ['B', 'KiB'])) as Error).message).toBe('--units must be one of B, KiB, got "kib"');
    const converted = thrown(() =>
      usageOf(() => {
        throw new MemscopeError('bad-backend', '--backend: unknown backend "tpu"');
      }),
    );
    expect([isUsageError(converted), (converted as Error).message]).toEqual([true, '--backend: unknown backend "tpu"']);
    // Anything else (a bug) is not dressed up as a usage error.
    const bug = thrown(() =>
      usageOf(() => {
        throw new TypeError('x is undefined');
      }),
    );
    expect([bug instanceof TypeError, isUsageError(bug)]).toEqual([true, false]);
  });
});

describe('runCli: one place maps every failure to an exit code and one line', () => {
  let stderr: string[] = [];
  afterEach(() => {
    vi.restoreAllMocks();
    process.exitCode = undefined;
  });

  async function run(action: () => void): Promise<{ code: number | string | undefined; stderr: string }> {
    stderr = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
    const register = (program: Command): void => {
      program.command('probe').action(action);
    };
    await runCli(['node', 'memscope', 'probe'], { probe: async () => ({ register }) });
    return { code: process.exitCode, stderr: stderr.join('') };
  }

  it('a usage error exits 2 and points at the verb help', async () => {
    expect(await run(() => nonNegativeInt('many', '--top'))).toEqual({ code: 2, stderr: 'memscope: --top must be a non-negative integer, got "many" (see memscope probe --help)\n' });
  });

  it('bad input exits 1 with its message', async () => {
    const fail = () => {
      throw new MemscopeError('bad-snapshot', 'x.pickle: pickle: file ends before STOP at offset 3');
    };
    expect(await run(fail)).toEqual({ code: 1, stderr: 'memscope: x.pickle: pickle: file ends before STOP at offset 3\n' });
  });

  it('a system error that escaped a reader is named as the readers name it', async () => {
    const missing = path.join(tmpdir(), `memscope-no-such-file-${process.pid}`);
    expect(await run(() => readFileSync(missing))).toEqual({ code: 1, stderr: `memscope: ${missing}: no such file\n` });
  });

  it('a bug is one line without a stack, exit 1', async () => {
    const bug = () => {
      throw new TypeError("Cannot read properties of undefined (reading 'size')");
    };
    expect(await run(bug)).toEqual({
      code: 1,
      stderr: "memscope: internal error: Cannot read properties of undefined (reading 'size') (MEMSCOPE_DEBUG=1 prints the stack)\n",
    });
  });
});

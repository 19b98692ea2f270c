/** Runs `memscope replay ARGS` in this process and returns what it printed on stdout. */
import { Command } from 'commander';
import { vi } from 'vitest';
import { register } from '../../src/cli/commands/replay.js';

export async function runReplay(...args: string[]): Promise<string> {
  const out: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out.push(String(chunk));
    return true;
  });
  try {
    const program = new Command().exitOverride();
    register(program);
    await program.parseAsync(['node', 'memscope', 'replay', ...args]);
  } finally {
    spy.mockRestore();
  }
  return out.join('');
}

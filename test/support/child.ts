// Child processes for tests, waited for without blocking the test worker: vitest's worker keeps
// answering its runner meanwhile (a long spawnSync there makes it report RPC timeouts).
import { spawn, type SpawnOptions } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './fixtures.js';

export interface ChildOutcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node ARGS…` to its end and collects what it printed. */
export function runNode(args: readonly string[], options: SpawnOptions = {}): Promise<ChildOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { ...options, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The CLI from source (src/cli/main.ts through tsx), run in the repository, bounded by 180 s. */
export function sourceCli(args: readonly string[]): Promise<ChildOutcome> {
  return runNode(['--import', 'tsx', join(repoRoot, 'src/cli/main.ts'), ...args], { cwd: repoRoot, timeout: 180_000 });
}

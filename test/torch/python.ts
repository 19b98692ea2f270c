// Runs python3 (present on every machine memscope is developed on) to make or check pickles.
import { execFileSync } from 'node:child_process';

/** Runs a python3 script with `args` (its sys.argv[1:]); `input` goes to stdin; returns stdout bytes. */
export function python(script: string, input?: Uint8Array, args: readonly string[] = []): Buffer {
  return execFileSync('python3', ['-c', script, ...args], { input, maxBuffer: 1 << 30 });
}

/** Runs the python3 script file at `path` (its directory is on its import path) with `args`; returns stdout bytes. */
export function pythonFile(path: string, args: readonly string[] = []): Buffer {
  return execFileSync('python3', [path, ...args], { maxBuffer: 1 << 30 });
}

/** pickle.dumps(eval(expr), protocol) from python3. */
export function pythonPickle(expr: string, protocol: number, prelude = ''): Uint8Array {
  return new Uint8Array(
    python(`import pickle, sys\n${prelude}\nsys.stdout.buffer.write(pickle.dumps(${expr}, protocol=${protocol}))`),
  );
}

// CPython's allocator state after trace events (state_history_truth.py beside this file), for the
// state history tests.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export interface PythonState {
  segments: [number, number][];
  blocks: [number, number, number][];
}

/** The state after each of `events` (-1: before the first) on device trace `trace` of `file`. */
export function pythonStates(file: string, trace: number, events: number[]): Record<string, PythonState> {
  const r = spawnSync('python3', [join(import.meta.dirname, 'state_history_truth.py'), file, String(trace), ...events.map(String)], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Record<string, PythonState>;
}

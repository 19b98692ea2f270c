/**
 * `memscope run`'s own work: reading its options and running the program in a child Node process
 * with the capture preload (run-preload.ts). Nothing here loads commander, a verb or a model
 * module, so the `memscope` bin can start the child straight away (src/cli/bin.ts): what a user
 * waits for under `memscope run` is the program, and every module the parent loads before the
 * spawn adds to it. commands/run.ts registers the same verb with commander, for `--help` and for
 * the one-line usage errors, and runs the child through the same function.
 */
import { spawn } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, openSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { writeProblem } from '../core/file-problems.js';

export interface RunOptions {
  output?: string;
  stacks?: boolean;
  maxEntries?: number;
  backend?: string;
  quiet?: boolean;
  json?: boolean;
}

/** One `memscope run` as its arguments ask for it. */
export interface RunRequest {
  readonly script: string;
  readonly args: string[];
  readonly opts: RunOptions;
}

/** The options of `run` that take a value, by every spelling commands/run.ts registers. */
const VALUE_OPTIONS: Readonly<Record<string, 'output' | 'maxEntries' | 'backend'>> = {
  '-o': 'output',
  '--output': 'output',
  '--max-entries': 'maxEntries',
  '--backend': 'backend',
};
const FLAG_OPTIONS: Readonly<Record<string, 'stacks' | 'quiet' | 'json'>> = {
  '--stacks': 'stacks',
  '-q': 'quiet',
  '--quiet': 'quiet',
  '--json': 'json',
};

/**
 * Reads the arguments after `run` when they are plainly right: known options (each spelled in
 * full, values separate or after `=`), then a readable script file, then the program's own
 * arguments untouched. Anything else — help, an unknown or malformed option, a bad value, a
 * missing or unreadable script — gives null, and the caller takes commander's path, whose
 * one-line usage and file errors stay the only wording of each mistake.
 */
export function parseRunArgs(argv: readonly string[]): RunRequest | null {
  const opts: RunOptions = {};
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-') || arg === '-') break;
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const flag = FLAG_OPTIONS[name];
    if (flag !== undefined && name === arg) {
      opts[flag] = true;
      continue;
    }
    const key = VALUE_OPTIONS[name];
    if (key === undefined) return null;
    const value = name === arg ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || value.startsWith('-')) return null;
    if (key === 'maxEntries') {
      if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(Number(value))) return null;
      opts.maxEntries = Number(value);
    } else {
      opts[key] = value;
    }
  }
  const script = argv[i];
  if (script === undefined || !isReadableFile(script)) return null;
  return { script, args: argv.slice(i + 1), opts };
}

function isReadableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** The preload beside this module (dist/cli/run-preload.js; the .ts source under tsx) and the loader it needs. */
function preloadArgs(): string[] {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return ['--import', new URL('./run-preload.js', here).href];
  // From source the preload is TypeScript, so the child needs tsx's loader too.
  const tsx = pathToFileURL(createRequire(here).resolve('tsx')).href;
  return ['--import', tsx, '--import', new URL('./run-preload.ts', here).href];
}

/**
 * A run memscope refuses before the program starts, in one line (a capture path it cannot write).
 * Not a MemscopeError: this module runs in the bin's fast path, which loads no copy of that class;
 * the caller words it as one.
 */
export class RunRefusal extends Error {}

/** Where the capture goes when `-o` is not given: memscope-<script>.<pid>.capture.ndjson here. */
function defaultOutput(scriptPath: string): string {
  return `memscope-${basename(scriptPath).replace(/\.[cm]?[jt]s$/, '')}.${process.pid}.capture.ndjson`;
}

/**
 * Runs `script` in a child Node process with the capture preload installed and returns its exit
 * code (128 + the signal's number when a signal ended it) and the capture's path. The child
 * inherits stdio; under `json` its stdout goes to stderr, so that stdout carries only the report.
 */
export async function runWithCapture(script: string, args: readonly string[], opts: RunOptions): Promise<{ exitCode: number; output: string }> {
  const scriptPath = resolve(script);
  const output = resolve(opts.output ?? defaultOutput(scriptPath));
  // The capture's file is made here, before the program starts: a path that cannot be written is
  // one line from memscope, not the child's stack trace after the program ran for nothing.
  try {
    closeSync(openSync(output, 'w'));
  } catch (err) {
    throw new RunRefusal(`${output}: cannot write it: ${writeProblem(err)}`);
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MEMSCOPE_RUN_OUTPUT: output,
    MEMSCOPE_RUN_ARGV: JSON.stringify([scriptPath, ...args]),
    MEMSCOPE_RUN_STACKS: opts.stacks ? '1' : '0',
    MEMSCOPE_RUN_MAX_ENTRIES: opts.maxEntries === undefined ? '' : String(opts.maxEntries),
    MEMSCOPE_RUN_BACKEND: opts.backend ?? '',
  };
  const child = spawn(process.execPath, [...preloadArgs(), scriptPath, ...args], { stdio: ['inherit', opts.json ? 'pipe' : 'inherit', 'inherit'], env });
  child.stdout?.pipe(process.stderr);
  // Ctrl-C reaches the child through the terminal's process group; the parent just waits for it.
  // SIGTERM and SIGHUP sent to memscope alone (a supervisor, a CI timeout, a closed session) are
  // passed on, so the program ends as if it had them, its capture finished, and memscope after it.
  const ignore = (): void => {};
  const pass = (signal: NodeJS.Signals) => (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  const passed = [['SIGTERM', pass('SIGTERM')], ['SIGHUP', pass('SIGHUP')]] as const;
  process.on('SIGINT', ignore);
  for (const [signal, handler] of passed) process.on(signal, handler);
  try {
    const exitCode = await new Promise<number>((res, rej) => {
      child.on('error', rej);
      child.on('exit', (code, signal) => res(code ?? (signal ? 128 + (SIGNAL_NUMBERS[signal] ?? 0) : 1)));
    });
    return { exitCode, output };
  } finally {
    process.removeListener('SIGINT', ignore);
    for (const [signal, handler] of passed) process.removeListener(signal, handler);
  }
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

/**
 * The end of a run without `--json`: where the capture went, on stderr (unless `-q`), and the
 * program's exit code as memscope's.
 */
export function finishPlainRun(exitCode: number, output: string, opts: RunOptions): void {
  // No file: the run was refused before the program started (a bad --backend), and said why.
  if (!opts.quiet && existsSync(output)) {
    const arg = shellWord(output);
    process.stderr.write(`memscope: capture written to ${output}\n  next: memscope report ${arg} -o report.html · memscope leaks ${arg}\n`);
  }
  process.exitCode = exitCode;
}

/** `path` as one shell word, quoted only when it must be, so the hint pastes as it is. */
function shellWord(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}

/**
 * The module `memscope run` preloads into the program with `node --import`.
 * It runs before the program's first line, so it sees every TFJS allocation:
 *
 * - TFJS keeps its one engine on `globalThis._tfengine`, created when
 *   tfjs-core is first loaded (by whichever copy the program resolves). The
 *   preload puts a setter on that global name and attaches the TFJS adapter
 *   the moment the engine is stored — no tfjs import here, so the engine
 *   instrumented is always the program's own.
 * - Models and optimizers are found as the program uses them
 *   (src/tfjs/auto-track-node.ts).
 * - Steps end at each optimizer update, at each top-level inference call
 *   (`predict`, `execute`, `executeAsync`) and at each `step()` the program
 *   calls (memscope/tfjs), so leak detection works for inference programs too.
 * - Records stream to the capture file through synchronous writes, flushed
 *   every 200 ms and at every step end; the end record is written on exit
 *   (including uncaught errors and SIGINT/SIGTERM/SIGHUP).
 *
 * Settings come from the environment (`MEMSCOPE_RUN_*`), set by `memscope run`.
 */
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AdapterSession } from '../core/adapter.js';
import { tfjsAdapter } from '../tfjs/adapter.js';
import { installAutoTracking } from '../tfjs/auto-track-node.js';
import { FileCaptureSink } from '../capture/file-sink-node.js';
import { CaptureRecorder } from '../capture/recorder.js';
import { CaptureWriter } from '../capture/writer.js';
import { onStep } from '../capture/step.js';

const env = process.env;
const output = env.MEMSCOPE_RUN_OUTPUT;
if (output) await startCapture(output);

async function startCapture(path: string): Promise<void> {
  const argv: string[] = JSON.parse(env.MEMSCOPE_RUN_ARGV ?? '[]');
  const backend = env.MEMSCOPE_RUN_BACKEND || null;
  const stacks = env.MEMSCOPE_RUN_STACKS === '1';
  const maxEntries = env.MEMSCOPE_RUN_MAX_ENTRIES ? Number(env.MEMSCOPE_RUN_MAX_ENTRIES) : null;
  // Don't let our own variables leak into programs the script spawns.
  for (const k of Object.keys(env)) if (k.startsWith('MEMSCOPE_RUN_')) delete env[k];

  const sink = new FileCaptureSink(path);
  const writer = new CaptureWriter(sink, { created: new Date().toISOString(), argv, backend, stacks, maxEntries });
  // memscope's own frames (this package's src/ and dist/) are folded with library frames.
  const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const recorder = new CaptureRecorder(writer, {
    stacks,
    maxEntries,
    internalFrames: [`${packageRoot}/src/`, `${packageRoot}/dist/`, 'node:internal'],
  });

  let session: AdapterSession | null = null;
  let autoTracking: { restore(): void } | null = null;
  let warned = false;
  const warn = (err: unknown): void => {
    if (warned) return;
    warned = true;
    process.stderr.write(`memscope: capture hook failed (the program continues): ${err instanceof Error ? err.message : String(err)}\n`);
  };

  const attach = (): void => {
    if (session) return;
    try {
      const attached = tfjsAdapter.attach(recorder);
      session = attached;
      recorder.adoptExisting(attached.liveStorages());
    } catch (err) {
      warn(err);
    }
  };

  // Attach as soon as tfjs-core stores its engine on globalThis.
  const g = globalThis as { _tfengine?: unknown };
  if (g._tfengine != null) attach();
  else {
    Object.defineProperty(globalThis, '_tfengine', {
      configurable: true,
      enumerable: false,
      get: () => undefined,
      set(value: unknown) {
        Object.defineProperty(globalThis, '_tfengine', { value, writable: true, configurable: true, enumerable: true });
        attach();
      },
    });
  }
  // Models and optimizers are found from module loading; by the time one is used the engine exists.
  autoTracking = installAutoTracking(
    {
      module: (model, name) => (attach(), session?.module(model, name)),
      optimizer: (opt) => (attach(), session?.optimizer(opt)),
      inferenceEnd: (kind) => recorder.mark(kind),
    },
    warn,
  );
  const removeStepListener = onStep(() => {
    try {
      recorder.mark('step');
    } catch (err) {
      warn(err);
    }
  });

  const flushTimer = setInterval(() => writer.flush(), 200);
  flushTimer.unref();

  let finished = false;
  let uncaught: string | null = null;
  const finish = (exitCode: number | null): void => {
    if (finished) return;
    finished = true;
    clearInterval(flushTimer);
    try {
      recorder.finish({ exitCode, error: uncaught });
    } catch (err) {
      warn(err);
    }
    sink.close();
    removeStepListener();
    autoTracking?.restore();
    try {
      (session as AdapterSession | null)?.detach();
    } catch {
      // The process is ending; a failed restore must not change its exit.
    }
  };
  process.on('uncaughtExceptionMonitor', (err) => {
    uncaught = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  });
  process.on('exit', (code) => finish(code));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      if (process.listenerCount(signal) > 1) {
        // The program handles this signal itself (e.g. saves and exits): keep recording, just flush.
        writer.flush();
        return;
      }
      // Nobody else listens: the default action would kill the process. Finish, then let it.
      uncaught = `killed by ${signal}`;
      finish(null);
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }

  if (backend) {
    try {
      await selectBackend(backend, argv[0]);
    } catch (err) {
      // A bad --backend is memscope's usage error: one line, exit 2, before the program runs,
      // and no capture of a program that never ran (memscope then says none was written).
      process.stderr.write(`memscope: ${err instanceof Error ? err.message : String(err)}\n`);
      finished = true;
      sink.close();
      rmSync(path, { force: true });
      process.exit(2);
    }
  }
}

/**
 * --backend NAME: loads the program's own copy of the backend package and
 * makes it current before the program starts (a later `tf.setBackend` in the
 * program still wins).
 */
async function selectBackend(name: string, script: string | undefined): Promise<void> {
  const req = createRequire(resolve(script ?? 'index.js'));
  const tf = req('@tensorflow/tfjs-core') as { setBackend(n: string): Promise<boolean>; ready(): Promise<void> };
  try {
    req(`@tensorflow/tfjs-backend-${name}`);
  } catch {
    throw new Error(`--backend ${name}: the program cannot load @tensorflow/tfjs-backend-${name}`);
  }
  // webgl and webgpu load in Node but need a browser's GPU API: said so, not left to TFJS's words.
  const browserOnly = name === 'webgl' || name === 'webgpu' ? ` (${name} runs in a browser: capture the page with memscope/browser's startCapture)` : '';
  let ok: boolean;
  try {
    ok = await tf.setBackend(name);
  } catch (err) {
    throw new Error(`--backend ${name}: TFJS could not initialise the backend: ${err instanceof Error ? err.message : String(err)}${browserOnly}`);
  }
  if (!ok) throw new Error(`--backend ${name}: TFJS could not initialise the backend${browserOnly}`);
  await tf.ready();
}

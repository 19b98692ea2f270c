/**
 * A capture of a TFJS program running in a page, in the format `memscope run` writes
 * (docs/CAPTURE_FORMAT.md), so `memscope leaks` and `memscope report` read it as they read a
 * Node run's. The recording is the same as `memscope run`'s: the TFJS adapter feeds the capture
 * recorder; models and optimizers are found as the program uses them (from the `tf` namespaces
 * the page passes in, by the same prototype wrapping `memscope run` uses); steps end at each
 * optimizer update, each top-level `predict`/`execute`, and each `step()`.
 */
import type { AdapterSession } from '../core/adapter.js';
import { MemscopeError } from '../core/errors.js';
import { CaptureRecorder } from '../capture/recorder.js';
import { onStep } from '../capture/step.js';
import { CaptureWriter, type CaptureSink } from '../capture/writer.js';
import { tfjsAdapter } from '../tfjs/adapter.js';
import { createModelTracking, type ModelTracking } from '../tfjs/auto-track.js';
import { downloadFile, timestampedName } from './download.js';

export interface BrowserCaptureOptions {
  /**
   * The page's TFJS namespaces (`import * as tf from '@tensorflow/tfjs'`, or tfjs-core and
   * tfjs-layers apart): models, optimizers and graph models are found on their prototypes as the
   * program uses them. Without it, register them with `capture.module()` / `capture.optimizer()`.
   */
  tf?: object | readonly object[];
  /** Record the allocating JS stack of storages that outlive a step (what `leaks` locates leaks with). */
  stacks?: boolean;
  /** Record at most this many allocations individually; later ones are only counted. */
  maxEntries?: number | null;
  /**
   * Substrings of script URLs that are library code, folded like installed packages (URLs with
   * `node_modules/` always are: a dev server such as Vite serves dependencies from there).
   */
  libraryFrames?: readonly string[];
  /** What the capture header names as the program; the page's URL by default. */
  program?: string;
}

/** A running browser capture. */
export interface BrowserCapture {
  /** Whether `stop()` has been called. */
  readonly stopped: boolean;
  /** Marks the end of one unit of the program's work (as memscope/tfjs's `step()` does). */
  step(): void;
  /** Registers a model (layers and weights become modules and Parameters). */
  module(model: unknown, name?: string): void;
  /** Registers an optimizer (its state becomes Optstate; its steps end training steps). */
  optimizer(optimizer: unknown): void;
  /**
   * Ends the capture (end record, uninstalled hooks) and returns its whole text. Idempotent. A
   * capture longer than the engine's longest string (2^29 characters in V8) is stopped, then
   * refused as text with a MemscopeError: take it with `blob()` or `download()`.
   */
  stop(info?: { error?: string | null }): string;
  /** The capture text so far (complete only after `stop()`); refused past the longest string, as `stop()`. */
  text(): string;
  /** The capture so far as a Blob of UTF-8 (complete only after `stop()`), of any length. */
  blob(): Blob;
  /** Stops the capture and offers it as a file (`memscope-capture-<time>.ndjson` by default), of any length. */
  download(filename?: string): void;
}

const CAPTURE_MIME = 'application/x-ndjson';

/**
 * The writer's chunks, kept as written: joined into one string only when asked for text, so a
 * capture past the longest string an engine makes still leaves the page whole, as a Blob.
 */
export class CaptureChunks implements CaptureSink {
  private readonly chunks: string[] = [];
  private characters = 0;
  write(chunk: string): void {
    this.chunks.push(chunk);
    this.characters += chunk.length;
  }
  /** The text, or a MemscopeError when the engine cannot make a string that long. */
  text(): string {
    try {
      if (this.chunks.length > 1) this.chunks.splice(0, this.chunks.length, this.chunks.join(''));
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      throw new MemscopeError(
        'capture-too-long',
        `the capture is ${this.characters.toLocaleString('en-US')} characters, longer than this browser makes a string: take it with capture.blob() or capture.download()`,
      );
    }
    return this.chunks[0] ?? '';
  }
  blob(): Blob {
    return new Blob(this.chunks, { type: CAPTURE_MIME });
  }
}

/**
 * The script URLs a page's stacks fold as library code. Pages load memscope either from its own
 * file (a dev server's `node_modules/…`, folded anyway) or bundled: in a vendor chunk apart from
 * the program, whose file is then library code too and is added; or in one bundle with the
 * program, where no URL tells the program's frames from TFJS's and memscope's — said once on the
 * console, as the capture's sites would name library lines.
 */
function libraryFramesOf(given: readonly string[], stacks: boolean): string[] {
  const files = scriptFiles();
  if (files === null || !stacks) return [...given];
  const { memscope, caller } = files;
  if (memscope.includes('node_modules/') || given.some((p) => memscope.includes(p))) return [...given];
  if (caller !== memscope) return [...given, memscope];
  if (given.length === 0) {
    console.warn(
      `memscope: startCapture runs from the file that holds the program (${memscope}): stack frames cannot tell the program's lines from TFJS's and memscope's, ` +
        'so leaks may be located inside library code. Bundle the libraries into a chunk of their own (memscope then folds it), or use a dev server; see BROWSER.md.',
    );
  }
  return [...given];
}

/** The script of this function's code and of its caller's caller (startCapture's caller), by V8's stack API; null elsewhere. */
function scriptFiles(): { memscope: string; caller: string } | null {
  const capture = (Error as { captureStackTrace?: (o: object) => void }).captureStackTrace;
  if (typeof capture !== 'function') return null;
  const previous = (Error as { prepareStackTrace?: unknown }).prepareStackTrace;
  (Error as { prepareStackTrace?: unknown }).prepareStackTrace = (_err: unknown, sites: unknown) => sites;
  try {
    const holder: { stack?: unknown } = {};
    capture(holder);
    const sites = holder.stack as { getFileName(): string | null }[] | undefined;
    // 0: here, 1: libraryFramesOf, 2: startCapture, 3: the program's call.
    const memscope = sites?.[0]?.getFileName();
    const caller = sites?.[3]?.getFileName();
    return memscope && caller ? { memscope, caller } : null;
  } catch {
    return null;
  } finally {
    (Error as { prepareStackTrace?: unknown }).prepareStackTrace = previous;
  }
}

/**
 * Starts capturing the page's TFJS program. TFJS must be loaded (its engine exists once
 * `@tensorflow/tfjs-core` is imported). Hooks that fail never reach the program: the first
 * failure is reported once on the console and the program continues.
 */
export function startCapture(options: BrowserCaptureOptions = {}): BrowserCapture {
  // Stack frames come from V8's stack trace API (Chromium and other V8 browsers); elsewhere the
  // capture is recorded without them.
  const stacks = (options.stacks ?? false) && typeof (Error as { captureStackTrace?: unknown }).captureStackTrace === 'function';
  const maxEntries = options.maxEntries ?? null;
  if (maxEntries !== null && !(Number.isInteger(maxEntries) && maxEntries > 0)) {
    throw new MemscopeError('bad-option', `startCapture: maxEntries must be a positive integer or null, got ${String(maxEntries)}`);
  }
  const sink = new CaptureChunks();
  const program = options.program ?? (typeof location === 'undefined' ? 'page' : location.href);
  const writer = new CaptureWriter(sink, { created: new Date().toISOString(), argv: [program], backend: null, stacks, maxEntries, recorder: 'browser' });
  const recorder = new CaptureRecorder(writer, { stacks, maxEntries, internalFrames: libraryFramesOf(options.libraryFrames ?? [], stacks) });

  let warned = false;
  const warn = (err: unknown): void => {
    if (warned) return;
    warned = true;
    console.warn(`memscope: capture hook failed (the program continues): ${err instanceof Error ? err.message : String(err)}`);
  };
  const session: AdapterSession = tfjsAdapter.attach(recorder);
  recorder.adoptExisting(session.liveStorages());
  const tracking: ModelTracking = createModelTracking(
    {
      module: (model, name) => session.module(model, name),
      optimizer: (opt) => session.optimizer(opt),
      inferenceEnd: (kind) => recorder.mark(kind),
    },
    warn,
  );
  const namespaces = options.tf === undefined ? [] : Array.isArray(options.tf) ? options.tf : [options.tf];
  for (const ns of namespaces) tracking.watch(ns);
  const removeStepListener = onStep(() => {
    try {
      recorder.mark('step');
    } catch (err) {
      warn(err);
    }
  });

  let stopped = false;
  const stopCapture = (info: { error?: string | null } = {}): void => {
    stopped = true;
    removeStepListener();
    tracking.restore();
    try {
      recorder.finish({ exitCode: null, error: info.error ?? null });
    } finally {
      session.detach();
    }
  };
  const stop = (info: { error?: string | null } = {}): string => {
    if (!stopped) stopCapture(info);
    return sink.text();
  };

  return {
    get stopped() {
      return stopped;
    },
    step() {
      if (!stopped) recorder.mark('step');
    },
    module(model, name) {
      session.module(model, name);
    },
    optimizer(optimizer) {
      session.optimizer(optimizer);
    },
    stop,
    text() {
      if (!stopped) writer.flush();
      return sink.text();
    },
    blob() {
      if (!stopped) writer.flush();
      return sink.blob();
    },
    download(filename) {
      if (!stopped) stopCapture();
      downloadFile(sink.blob(), filename ?? timestampedName('memscope-capture', 'ndjson'), CAPTURE_MIME);
    },
  };
}

/**
 * `profile(options, fn)`: torch.profiler's memory-profiling recording for
 * TensorFlow.js. Runs `fn` (sync or async) with a ProfileRecorder attached to
 * the TFJS adapter and returns what it recorded; `memoryProfile()` runs the
 * analysis (src/analysis).
 *
 * ```ts
 * const result = profile({ recordShapes: true, profileMemory: true, withStack: true, models: [model] },
 *   () => model.fit(xs, ys, { epochs: 1 }));
 * const timeline = (await result).memoryTimeline();
 * ```
 *
 * TFJS layers and optimizers only report calls once instrumented: pass them as
 * `models` / `optimizers` (a compiled model's optimizer is included). PyTorch's
 * Python tracer sees every module without being told.
 */

import { afterSettled } from '../core/settle.js';
import { MemscopeError } from '../core/errors.js';
import { MemoryProfile } from '../analysis/memory-profile.js';
import { ProfileRecorder, type RecordedProfile } from '../analysis/recorder.js';
import type { ProfileConfig } from '../analysis/profile-tree.js';
import { MemoryProfileTimeline } from '../analysis/timeline.js';
import { tfjsAdapter } from './adapter.js';

export interface ProfileOptions {
  /** Record kernel input/output tensors (ids, storages, dtypes, shapes). */
  readonly recordShapes?: boolean;
  /** Record storage allocations and frees. */
  readonly profileMemory?: boolean;
  /** Record layer calls and optimizer steps (PyTorch's Python tracer). */
  readonly withStack?: boolean;
  /** Layers models whose layer calls to record (with `withStack`); their compiled optimizers too. */
  readonly models?: readonly unknown[];
  /** Optimizers whose steps to record (with `withStack`). */
  readonly optimizers?: readonly unknown[];
}

export class ProfileResult<T> {
  private profileCache: MemoryProfile | null = null;

  constructor(
    /** What `fn` returned (awaited, for an async `fn`). */
    readonly value: T,
    readonly recording: RecordedProfile,
  ) {}

  /**
   * The memory profile (PyTorch's `prof._memory_profile()`). Requires all
   * three recording flags, and says which are missing, as PyTorch does.
   */
  memoryProfile(): MemoryProfile {
    const config = this.recording.config;
    const missing = (['recordShapes', 'profileMemory', 'withStack'] as const).filter((k) => !config[k]).map((k) => `${k}=true`);
    if (missing.length > 0) {
      throw new MemscopeError('memory-profile-config', `${missing.join(', ')} required for memory profiling.`);
    }
    return (this.profileCache ??= new MemoryProfile(this.recording));
  }

  /** The memory timeline as data, JSON and HTML (PyTorch's `MemoryProfileTimeline`). */
  memoryTimeline(): MemoryProfileTimeline {
    return new MemoryProfileTimeline(this.memoryProfile());
  }
}

/** Records `fn`. An async `fn` gives a promise of the result. Whatever `fn` throws is rethrown after detaching. */
export function profile<T>(options: ProfileOptions, fn: () => Promise<T>): Promise<ProfileResult<T>>;
export function profile<T>(options: ProfileOptions, fn: () => T): ProfileResult<T>;
export function profile<T>(options: ProfileOptions, fn: () => T | Promise<T>): ProfileResult<T> | Promise<ProfileResult<T>> {
  const config: ProfileConfig = {
    recordShapes: options.recordShapes === true,
    profileMemory: options.profileMemory === true,
    withStack: options.withStack === true,
  };
  const recorder = new ProfileRecorder(config);
  const session = tfjsAdapter.attach(recorder);
  let detached = false;
  const detach = () => {
    if (!detached) {
      detached = true;
      session.detach();
    }
  };
  const setUpAndRun = (): T | Promise<T> => {
    recorder.addBaseline(session.liveStorages());
    if (config.withStack) {
      const optimizers = new Set<unknown>(options.optimizers ?? []);
      for (const model of options.models ?? []) {
        session.module(model);
        const compiled = (model as { optimizer?: unknown }).optimizer;
        if (compiled && typeof (compiled as { applyGradients?: unknown }).applyGradients === 'function') optimizers.add(compiled);
      }
      for (const o of optimizers) session.optimizer(o);
    }
    return fn();
  };
  return afterSettled(
    setUpAndRun,
    (value) => {
      const recording = recorder.finish();
      detach();
      return new ProfileResult(value as T, recording);
    },
    detach,
  );
}

import { expect } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import type { MemoryEventSink, StorageRef } from '../../../src/core/events.js';
import { tfjsAdapter } from '../../../src/tfjs/index.js';
import { activeInstallation } from '../../../src/tfjs/adapter.js';
import { PATCHED_ENGINE_METHODS } from '../../../src/tfjs/engine-types.js';
import { type EngineOracle, installEngineOracle } from './engine-oracle.js';
import { prng } from '../../support/prng.js';
import { useBackend } from './backends.js';

/**
 * The storage invariant over randomized TFJS programs: at every kernel
 * boundary (start and end of every kernel, nested ones included) the bytes
 * memscope reports live per device equal the engine's live bytes
 * deduplicated by dataId (see support/engine-oracle.ts for how that figure is
 * obtained without memscope). Programs mix ops that make new dataIds with ops
 * that share one (reshape, clone, variable from a tensor), tidy/keep/dispose,
 * variables and assign, tf.grads, variableGrads and customGrad.
 */

type Rng = ReturnType<typeof prng>;

/** A sink that runs `check` at the start and end of every kernel and keeps the first mismatch it reports. */
abstract class CheckedAtKernels implements MemoryEventSink {
  checks = 0;
  mismatch: string | null = null;
  constructor(private readonly check: (where: string) => string | null) {}
  /** Runs the check now (outside any event), keeping the first mismatch. */
  checkNow(where: string): void {
    this.checks++;
    this.mismatch ??= this.check(where);
  }
  onKernelStart(k: { name: string }): void {
    this.checks++;
    this.mismatch ??= this.check(`start of ${k.name}`);
  }
  onKernelEnd(k: { name: string }): void {
    this.checks++;
    this.mismatch ??= this.check(`end of ${k.name}`);
  }
}

/** A memscope sink keeping its own live-bytes account from alloc/free events. */
class LiveAccount extends CheckedAtKernels {
  readonly bytes = new Map<string, number>();
  readonly live = new Set<StorageRef>();
  seed(storages: Iterable<StorageRef>): void {
    for (const s of storages) this.onStorageAlloc(s);
  }
  onStorageAlloc(s: StorageRef): void {
    if (this.live.has(s)) this.mismatch ??= `storage ${s.id} allocated twice`;
    this.live.add(s);
    this.bytes.set(s.device, (this.bytes.get(s.device) ?? 0) + s.bytes);
  }
  onStorageFree(s: StorageRef): void {
    if (!this.live.delete(s)) this.mismatch ??= `storage ${s.id} freed but not live`;
    this.bytes.set(s.device, (this.bytes.get(s.device) ?? 0) - s.bytes);
  }
}

function sameBytes(a: Map<string, number>, b: Map<string, number>): boolean {
  const keys = new Set([...a.keys(), ...b.keys()]);
  for (const k of keys) if ((a.get(k) ?? 0) !== (b.get(k) ?? 0)) return false;
  return true;
}

const fmt = (m: Map<string, number>) => JSON.stringify([...m].filter(([, v]) => v !== 0).sort());

/** The check an account runs at every kernel boundary: its live bytes per device and storage count against the engine's. */
function checkAgainstEngine(
  oracle: EngineOracle,
  account: () => { readonly bytes: Map<string, number>; readonly live: { readonly size: number } },
  seed: () => number,
): (where: string) => string | null {
  return (where) => {
    const { bytes, live } = account();
    const engineBytes = oracle.bytesByDevice();
    if (!sameBytes(bytes, engineBytes)) return `seed ${seed()}, ${where}: memscope ${fmt(bytes)} vs engine ${fmt(engineBytes)}`;
    if (live.size !== oracle.count()) return `seed ${seed()}, ${where}: memscope knows ${live.size} storages, engine ${oracle.count()} dataIds`;
    return null;
  };
}

const SHAPES: number[][] = [[2, 3], [3, 3], [3], [4, 2], [], [2, 2, 2]];

/** One randomized program. Returns a short trace of what it did (for failure messages). */
function runProgram(rng: Rng, steps: number, beforeStep?: (step: number) => void, moveTo?: string): string[] {
  const trace: string[] = [];
  const held: tf.Tensor[] = [];
  const vars: tf.Variable[] = [];
  const floats = () => held.filter((t) => !t.isDisposed && t.dtype === 'float32');
  const anyFloat = (): tf.Tensor => {
    const f = floats();
    if (f.length > 0) return rng.pick(f);
    const t = tf.randomNormal(rng.pick(SHAPES), 0, 1, 'float32', rng.int(1000));
    held.push(t);
    return t;
  };
  /** A tensor the program owns (so it is released at the end). */
  const own = <T extends tf.Tensor>(t: T): T => {
    held.push(t);
    return t;
  };
  // A customGrad op: runs as one composite kernel whose inner kernels nest inside it.
  const squareLoss = tf.customGrad(((x: tf.Tensor, save: tf.GradSaveFunc) => {
    save([x]);
    return { value: tf.sum(tf.square(x)), gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => tf.mul(dy, tf.mul(saved[0]!, 2)) };
  }) as unknown as Parameters<typeof tf.customGrad>[0]) as unknown as (x: tf.Tensor) => tf.Tensor;

  const ops: Array<[string, () => void]> = [
    ['make', () => held.push(tf.randomNormal(rng.pick(SHAPES), 0, 1, 'float32', rng.int(1000)))],
    ['make-int', () => held.push(tf.tensor1d([1, 2, 3, rng.int(9)], 'int32'))],
    ['unary', () => held.push(rng.pick([tf.relu, tf.exp, tf.neg, tf.square, tf.sigmoid, tf.tanh])(anyFloat()))],
    ['binary', () => {
      const a = anyFloat();
      held.push(rng.pick([tf.add, tf.mul, tf.sub])(a, rng.next() < 0.5 ? a : own(tf.scalar(rng.next()))));
    }],
    ['matmul', () => {
      const a = anyFloat();
      if (a.rank !== 2) return;
      held.push(tf.matMul(a, own(tf.ones([a.shape[1]!, 2]))));
    }],
    ['reshape', () => { const a = anyFloat(); held.push(tf.reshape(a, [a.size])); }],
    ['clone', () => held.push(tf.clone(anyFloat()))],
    ['cast', () => held.push(tf.cast(anyFloat(), 'int32'))],
    ['compare', () => { const a = anyFloat(); held.push(tf.greater(a, 0)); }],
    ['reduce', () => held.push(rng.next() < 0.5 ? tf.sum(anyFloat()) : tf.mean(anyFloat()))],
    ['concat', () => { const a = anyFloat(); held.push(tf.concat([tf.reshape(a, [-1]), tf.reshape(a, [-1])])); }],
    ['tidy', () => {
      const out = tf.tidy(() => {
        const a = anyFloat();
        const b = tf.add(tf.square(a), 1);
        const c = tf.mul(b, tf.scalar(2));
        if (rng.next() < 0.3) held.push(tf.keep(tf.neg(c)));
        return rng.next() < 0.5 ? tf.reshape(c, [c.size]) : c;
      });
      held.push(out);
    }],
    ['nested-tidy', () => {
      held.push(tf.tidy('outer', () => tf.tidy('inner', () => tf.relu(tf.sub(anyFloat(), 0.5)))));
    }],
    ['dispose', () => {
      const live = held.filter((t) => !t.isDisposed);
      if (live.length > 0) rng.pick(live).dispose();
    }],
    ['dispose-many', () => {
      for (const t of held) if (!t.isDisposed && rng.next() < 0.3) t.dispose();
    }],
    ['variable', () => vars.push(tf.variable(anyFloat(), true, undefined))],
    ['assign', () => {
      const live = vars.filter((v) => !v.isDisposed);
      if (live.length === 0) return;
      const v = rng.pick(live);
      const fresh = tf.randomNormal(v.shape, 0, 1, 'float32', rng.int(1000));
      v.assign(fresh);
      if (rng.next() < 0.5) fresh.dispose();
      else held.push(fresh);
    }],
    ['dispose-var', () => {
      const live = vars.filter((v) => !v.isDisposed);
      if (live.length > 0) rng.pick(live).dispose();
    }],
    ['grads', () => {
      const x = anyFloat();
      const [g] = tf.grads((a: tf.Tensor) => tf.sum(tf.mul(tf.square(a), 3)))([x]);
      held.push(g!);
    }],
    ['variable-grads', () => {
      const live = vars.filter((v) => !v.isDisposed);
      if (live.length === 0) return;
      const { value, grads } = tf.variableGrads(() => tf.addN(live.map((v) => tf.sum(tf.square(v)))) as tf.Scalar, live);
      held.push(value, ...Object.values(grads));
    }],
    ['grad-of-grad', () => {
      const x = anyFloat();
      const d2 = tf.grad((a: tf.Tensor) => tf.sum(tf.grad((b: tf.Tensor) => tf.sum(tf.mul(b, tf.mul(b, b))))(a)));
      held.push(d2(x));
    }],
    ['custom-grad', () => {
      const x = anyFloat();
      const [g] = tf.grads((a: tf.Tensor) => squareLoss(a))([x]);
      held.push(g!);
    }],
    ['manual-step', () => {
      const live = vars.filter((v) => !v.isDisposed);
      if (live.length === 0) return;
      const v = rng.pick(live);
      tf.tidy(() => v.assign(tf.sub(v, tf.mul(tf.onesLike(v), 0.1))));
    }],
  ];

  if (moveTo !== undefined) {
    // Reads a tensor on another backend, which moves its data there, and switches back (both
    // backends are initialised, so setBackend switches at once).
    ops.push(['move', () => {
      const a = anyFloat();
      const home = tf.getBackend();
      void tf.setBackend(moveTo);
      held.push(tf.add(a, 1));
      void tf.setBackend(home);
    }]);
  }
  for (let i = 0; i < steps; i++) {
    beforeStep?.(i);
    const [name, op] = rng.pick(ops);
    trace.push(name);
    op();
  }
  for (const t of held) t.dispose();
  for (const v of vars) v.dispose();
  return trace;
}

/**
 * Runs `programs` seeded random programs on `backend` under one memscope
 * session (one per process: the oracle must see the engine from its first
 * tensor, and storages made before an attach are unknown to memscope by
 * design), checking the invariant at every kernel boundary, then detaches and
 * checks nothing is left patched.
 */
export async function checkInvariant(backend: 'cpu' | 'wasm', programs: number, steps: number): Promise<void> {
  const oracle = installEngineOracle();
  await useBackend(backend);
  const engineProto = Object.getPrototypeOf(tf.engine()) as Record<string, unknown>;
  const originals = PATCHED_ENGINE_METHODS.map((m) => engineProto[m]);

  let seed = 0;
  const account: LiveAccount = new LiveAccount(checkAgainstEngine(oracle, () => account, () => seed));
  const session = tfjsAdapter.attach(account);
  account.seed(session.liveStorages());
  for (seed = 1; seed <= programs; seed++) {
    const trace = runProgram(prng(seed * 7919), steps);
    expect(account.mismatch, `${account.mismatch}\nprogram: ${trace.join(' ')}`).toBeNull();
    // The program released everything it holds. What the engine still has
    // (TFJS itself keeps a dataId alive after some assign/clone sequences,
    // with or without memscope) memscope has too, and nothing more.
    expect([...session.liveStorages()].length).toBe(oracle.count());
    expect(account.live.size).toBe(oracle.count());
    expect(sameBytes(account.bytes, oracle.bytesByDevice()), fmt(account.bytes)).toBe(true);
  }
  expect(account.checks).toBeGreaterThan(programs * 100);
  expect(activeInstallation()?.internalErrors).toBe(0);

  session.detach();
  // Nothing dangling: no installation, every engine method is TFJS's own again.
  expect(activeInstallation()).toBeNull();
  PATCHED_ENGINE_METHODS.forEach((m, i) => expect(engineProto[m], m).toBe(originals[i]));
  // And the program still runs, untracked.
  const t = tf.add(tf.ones([2]), 1);
  expect(Array.from(t.dataSync())).toEqual([2, 2]);
}

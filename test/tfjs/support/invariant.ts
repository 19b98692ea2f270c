import { expect } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import type { MemoryEventSink, StorageBatchSink, StorageRef } from '../../../src/core/events.js';
import { tfjsAdapter } from '../../../src/tfjs/index.js';
import { activeInstallation } from '../../../src/tfjs/adapter.js';
import { PATCHED_ENGINE_METHODS } from '../../../src/tfjs/engine-types.js';
import { isDerivedStorageId } from '../../../src/tfjs/refs.js';
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

/**
 * The same account kept by storage id, as MemTracker's recorder keeps it: a StorageBatchSink, so
 * while it is the only storage sink the adapter keeps no object per storage and tells it of each
 * storage by id. An allocation of a known id and a free of an unknown one change nothing (the
 * contract of batches); the check against the engine at every kernel boundary is what would catch
 * a storage counted twice, never freed, or freed early.
 */
class LiveIdAccount extends CheckedAtKernels implements StorageBatchSink {
  readonly bytes = new Map<string, number>();
  readonly live = new Map<number, { bytes: number; device: string }>();
  idEvents = 0;
  batches = 0;
  objectEvents = 0;
  private add(id: number, bytes: number, device: string): void {
    if (this.live.has(id)) return;
    this.live.set(id, { bytes, device });
    this.bytes.set(device, (this.bytes.get(device) ?? 0) + bytes);
  }
  private remove(id: number): void {
    const e = this.live.get(id);
    if (e === undefined) return;
    this.live.delete(id);
    this.bytes.set(e.device, (this.bytes.get(e.device) ?? 0) - e.bytes);
  }
  onStorageAlloc(s: StorageRef): void {
    this.objectEvents++;
    this.add(s.id, s.bytes, s.device);
  }
  onStorageFree(s: StorageRef): void {
    this.objectEvents++;
    this.remove(s.id);
  }
  onStorageBatch(batch: Float64Array, length: number, device: string): void {
    this.batches++;
    for (let at = 0; at < length; at += 2) {
      this.idEvents++;
      if (batch[at + 1]! >= 0) this.add(batch[at]!, batch[at + 1]!, device);
      else this.remove(batch[at]!);
    }
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

/**
 * The invariant for a sink that takes storages by id (as MemTracker's recorder does), on `backend`
 * (a name registered with TFJS; the engine oracle is installed first). Every `switchEvery` steps a
 * second sink that wants storage objects is attached or detached, so the adapter goes between
 * keeping no object per storage and keeping one: storages made in one mode are freed in the other,
 * and each mode's events must still add up to the engine's figure. `numbered`: whether the
 * backend numbers its dataIds, so that in byId mode a new tensor's dataId carries nothing of
 * memscope's (otherwise it carries its storage object, as in the other mode). The account is also
 * checked between steps, outside any event.
 */
export async function checkInvariantById(
  backend: string,
  programs: number,
  steps: number,
  numbered: boolean,
  options: { switchEvery?: number; moveTo?: 'cpu' } = {},
): Promise<void> {
  const switchEvery = options.switchEvery ?? 40;
  const oracle = installEngineOracle();
  if (backend === 'cpu' || backend === 'wasm') await useBackend(backend);
  else if (!(await tf.setBackend(backend))) throw new Error(`could not switch TFJS to ${backend}`);
  const engineProto = Object.getPrototypeOf(tf.engine()) as Record<string, unknown>;
  const originals = PATCHED_ENGINE_METHODS.map((m) => engineProto[m]);

  let seed = 0;
  const account: LiveIdAccount = new LiveIdAccount(checkAgainstEngine(oracle, () => account, () => seed));
  const session = tfjsAdapter.attach(account);
  const objectSink: MemoryEventSink = { onStorageAlloc() {}, onStorageFree() {} };
  let objectSession: ReturnType<typeof tfjsAdapter.attach> | null = null;
  let switches = 0;
  let moves = 0;
  const carriesMemscope = (t: tf.Tensor) => Object.getOwnPropertySymbols(t.dataId).length > 0;
  const probeObjects = (when: string): void => {
    const probe = tf.zeros([1]);
    const expectObjects = objectSession !== null || !numbered;
    if (carriesMemscope(probe) !== expectObjects) account.mismatch ??= `seed ${seed}, ${when}: a new dataId ${expectObjects ? 'lacks' : 'carries'} memscope's storage object`;
    probe.dispose();
  };
  const toggle = (step: number): void => {
    if (step % switchEvery === switchEvery - 1) {
      probeObjects('before a switch');
      if (objectSession === null) objectSession = tfjsAdapter.attach(objectSink);
      else {
        objectSession.detach();
        objectSession = null;
      }
      switches++;
      probeObjects('after a switch');
    }
    // Between two steps, outside any event, the account equals the engine too.
    account.checkNow(`before step ${step}`);
  };
  for (seed = 1; seed <= programs; seed++) {
    if (seed === 2 && options.moveTo !== undefined) {
      // Initialised after the attach, so ids still derive from dataIds (see StorageIdentity.deriveIds).
      await useBackend(options.moveTo);
      await useBackend(backend as 'cpu' | 'wasm');
    }
    const trace = runProgram(prng(seed * 7919), steps, toggle, seed >= 2 ? options.moveTo : undefined);
    moves += trace.filter((op) => op === 'move').length;
    expect(account.mismatch, `${account.mismatch}\nprogram: ${trace.join(' ')}`).toBeNull();
    expect(account.live.size).toBe(oracle.count());
    expect(sameBytes(account.bytes, oracle.bytesByDevice()), fmt(account.bytes)).toBe(true);
    // What the adapter lists as live (the storages it keeps, and its registered variables') is.
    for (const st of session.liveStorages()) expect(account.live.has(st.id), `storage ${st.id} listed live`).toBe(true);
  }
  (objectSession as ReturnType<typeof tfjsAdapter.attach> | null)?.detach();
  if (options.moveTo !== undefined) {
    expect(moves).toBeGreaterThan(programs);
    // A moved dataId keeps the number its first backend gave it, which the backend it moved to
    // may give another dataId: its storage gets a counted id, never one derived on its new backend.
    const a = tf.ones([3]);
    const ref = session.tensor(a);
    expect(isDerivedStorageId(ref.storage.id)).toBe(true);
    void tf.setBackend(options.moveTo);
    const b = tf.add(a, 1);
    expect(ref.storage.device).toBe(options.moveTo);
    expect(isDerivedStorageId(ref.storage.id)).toBe(false);
    void tf.setBackend(backend);
    tf.dispose([a, b]);
  }
  expect(switches).toBeGreaterThanOrEqual(programs * Math.floor(steps / switchEvery) - 1);
  expect(account.checks).toBeGreaterThan(programs * 100);
  // Both kinds of event came: by id while it was the only storage sink, as objects otherwise
  // (only objects for a backend whose dataIds are not numbered).
  if (numbered) expect(account.idEvents).toBeGreaterThan(0);
  else expect(account.idEvents).toBe(0);
  if (numbered) expect(account.batches).toBeGreaterThan(steps / 4);
  else expect(account.batches).toBe(0);
  expect(account.objectEvents).toBeGreaterThan(0);
  expect(activeInstallation()?.internalErrors).toBe(0);

  session.detach();
  expect(activeInstallation()).toBeNull();
  PATCHED_ENGINE_METHODS.forEach((m, i) => expect(engineProto[m], m).toBe(originals[i]));
}

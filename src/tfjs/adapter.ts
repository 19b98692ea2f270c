import type { AdapterSession, DeviceMemoryReading, FrameworkAdapter } from '../core/adapter.js';
import { MemscopeError } from '../core/errors.js';
import type { DeviceName, MemoryEventSink, ModuleRef, OptimizerRef, StorageRef, TensorRef } from '../core/events.js';
import { readDeviceMemory } from './device-memory.js';
import { globalEngine, isTensorLike } from './engine-types.js';
import { Installation } from './installation.js';
import type { TfLayer } from './refs.js';

/**
 * memscope's TensorFlow.js adapter. Attaching installs hooks on the one global
 * TFJS engine (`globalThis._tfengine`); every session shares that installation
 * and the last `detach()` restores every patched method. See
 * docs/TFJS_INSTRUMENTATION.md.
 *
 * A sink that needs storages made before it attached should read
 * `session.liveStorages()` right after `attach` (weights and optimizer state
 * made before the first attach are known: they are the engine's registered
 * variables).
 */

let current: Installation | null = null;
let refs = 0;

/** The installation while any session is attached (for annotate and tests). */
export function activeInstallation(): Installation | null {
  return current;
}

class TfjsSession implements AdapterSession {
  private detached = false;
  constructor(
    private readonly inst: Installation,
    private readonly sink: MemoryEventSink,
  ) {}

  private live(): Installation {
    if (this.detached) throw new MemscopeError('session-detached', 'this memscope TFJS session was detached; attach a new one');
    return this.inst;
  }

  module(model: unknown, name?: string): ModuleRef {
    const inst = this.live();
    const layer = model as TfLayer | null;
    if (layer == null || typeof layer !== 'object' || typeof layer.call !== 'function' || typeof layer.name !== 'string') {
      throw new MemscopeError('not-a-layer', `session.module() expects a tfjs-layers Layer or LayersModel, got ${describe(model)}`);
    }
    return inst.instrumentModule(layer, name ?? layer.name, null);
  }

  optimizer(optimizer: unknown): OptimizerRef {
    const inst = this.live();
    if (optimizer == null || typeof optimizer !== 'object' || typeof (optimizer as { applyGradients?: unknown }).applyGradients !== 'function') {
      throw new MemscopeError('not-an-optimizer', `session.optimizer() expects a tf.Optimizer (with applyGradients), got ${describe(optimizer)}`);
    }
    return inst.instrumentOptimizer(optimizer);
  }

  tensor(tensor: unknown): TensorRef {
    const inst = this.live();
    if (!isTensorLike(tensor)) throw new MemscopeError('not-a-tensor', `session.tensor() expects a tf.Tensor, got ${describe(tensor)}`);
    return inst.refFor(tensor);
  }

  liveStorages(): Iterable<StorageRef> {
    return this.live().liveStorages();
  }

  currentDevice(): DeviceName {
    const engine = this.live().engine;
    // Reading `backend` initialises the best registered backend if none is
    // set yet, exactly as the first TFJS op would; an async backend still
    // initialising throws there, and then the device is not known yet.
    if (engine.backendName == null) {
      try {
        void engine.backend;
      } catch {
        return 'unknown';
      }
    }
    return engine.backendName ?? 'unknown';
  }

  deviceMemory(device: DeviceName): DeviceMemoryReading | null {
    return readDeviceMemory(this.live().engine, device);
  }

  detach(): void {
    if (this.detached) return;
    this.detached = true;
    this.inst.unsubscribe(this.sink);
    refs--;
    if (refs === 0 && current === this.inst) {
      current = null;
      this.inst.uninstall();
    }
  }

  [Symbol.dispose](): void {
    this.detach();
  }
}

function describe(x: unknown): string {
  if (x === null) return 'null';
  if (typeof x !== 'object') return typeof x;
  return (x as object).constructor?.name ?? 'object';
}

export const tfjsAdapter: FrameworkAdapter = {
  name: 'tfjs',
  attach(sink: MemoryEventSink): AdapterSession {
    if (sink == null || typeof sink !== 'object') throw new MemscopeError('bad-sink', 'attach() expects a MemoryEventSink object');
    if (current === null) {
      const engine = globalEngine();
      if (engine === null) {
        throw new MemscopeError('tfjs-not-loaded', 'no TensorFlow.js engine found (globalThis._tfengine): import @tensorflow/tfjs-core (or @tensorflow/tfjs) before attaching memscope');
      }
      current = new Installation(engine);
    }
    refs++;
    current.subscribe(sink);
    return new TfjsSession(current, sink);
  },
};

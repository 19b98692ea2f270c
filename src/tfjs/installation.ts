import type { EventContext, MemoryEventSink } from '../core/events.js';
import type { PatchedEngineMethod, TfEngine, TfTensor } from './engine-types.js';
import type { TfLayer, TfjsModule, TfjsOptimizer, TfjsStorage, TfjsTensorRef } from './refs.js';
import { Attribution } from './attribution.js';
import { EnginePatches } from './engine-patches.js';
import { SinkDispatch } from './sink-dispatch.js';
import { StorageIdentity } from './storage-identity.js';

/**
 * One installation of memscope's hooks on the global TFJS engine, shared by every attached
 * session (reference counted by the adapter). It is four collaborators, each one concern, lowest
 * first (docs/ADAPTER_DESIGN.md, "Collaborators"):
 * - `dispatch` (sink-dispatch.ts): the context, the sinks, the emitters;
 * - `identity` (storage-identity.ts): storages, their ids, adoption, moves, tensor refs;
 * - `attribution` (attribution.ts): modules, gradient runs, backprop, optimizer steps, scopes;
 * - `patches` (engine-patches.ts): the wrappers on the engine, variables, layers and optimizers.
 * This class wires them together and is what the adapter's sessions talk to.
 */
export class Installation {
  readonly dispatch = new SinkDispatch();
  readonly identity: StorageIdentity;
  readonly attribution: Attribution;
  readonly patches: EnginePatches;

  constructor(readonly engine: TfEngine) {
    this.identity = new StorageIdentity(engine, this.dispatch);
    this.attribution = new Attribution(engine, this.dispatch, this.identity);
    this.patches = new EnginePatches(engine, this.dispatch, this.identity, this.attribution);
    this.identity.adoptRegisteredVariables((v) => this.patches.patchVariableClassOf(v));
  }

  get ctx(): EventContext {
    return this.dispatch.ctx;
  }

  get internalErrors(): number {
    return this.dispatch.internalErrors;
  }

  get sinkCount(): number {
    return this.dispatch.sinkCount;
  }

  subscribe(sink: MemoryEventSink): void {
    this.dispatch.subscribe(sink);
    this.applySinkNeeds();
  }

  unsubscribe(sink: MemoryEventSink): void {
    this.dispatch.unsubscribe(sink);
    this.applySinkNeeds();
  }

  private applySinkNeeds(): void {
    this.identity.applySinkNeeds();
  }

  refFor(t: TfTensor): TfjsTensorRef {
    return this.identity.refFor(t);
  }

  liveStorages(): TfjsStorage[] {
    return this.identity.liveStorages();
  }

  instrumentModule(layer: TfLayer, name: string, parent: TfjsModule | null): TfjsModule {
    return this.patches.instrumentModule(layer, name, parent);
  }

  instrumentOptimizer(optimizer: object): TfjsOptimizer {
    return this.patches.instrumentOptimizer(optimizer);
  }

  annotationStart(name: string): void {
    this.attribution.annotationStart(name);
  }

  annotationEnd(name: string): void {
    this.attribution.annotationEnd(name);
  }

  /** Puts back everything patched; events stop. */
  uninstall(): void {
    this.dispatch.active = false;
    this.patches.restore();
    this.identity.forgetAll();
    this.dispatch.clear();
    this.applySinkNeeds();
  }

  /** For tests: the function memscope replaced (by identity). */
  originalEngineMethod(name: PatchedEngineMethod): unknown {
    return this.patches.originalEngineMethod(name);
  }
}

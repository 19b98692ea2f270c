/**
 * Device-level WebGPU recording: the patches on the page's `GPUAdapter`, `GPUDevice`, `GPUBuffer`,
 * `GPUTexture` and `GPUQuerySet` prototypes, the record of every resource they create and destroy,
 * garbage-collected resources (the WebGPU leak), the attribution hooks frameworks call, and live
 * events. The torch.cuda.memory API over these records is `WebGPUMemory` (memory.ts).
 *
 * Nothing memscope does may change what the page sees: each patched method runs the original
 * first, with the same `this` and arguments, and returns its result or lets its exception through
 * untouched; memscope's own bookkeeping runs after it inside a catch that turns any failure into a
 * warning (`warnings`).
 */
import { MemscopeError } from '../core/errors.js';
import type { Frame } from '../torch/pytorch-vocabulary.js';
import { DeviceRecord, nowUs, type Attribution, type FreeReason, type HistoryState, type ResourceKind, type ResourceRecord } from './device-record.js';
import { pageClasses, type BufferDescriptorLike, type DeviceLike, type QuerySetDescriptorLike, type ResourceLike, type TextureDescriptorLike, type WebGPUClasses } from './gpu-types.js';
import { PatchSet } from './patches.js';
import { pageStack } from './stack.js';
import { textureBytes, textureShape } from './texture-bytes.js';

export interface InstallOptions {
  /** The classes to patch; the page's `GPUAdapter`, `GPUDevice`… by default. */
  classes?: WebGPUClasses;
  /** Capture the creating JavaScript stack of each resource (default true). */
  stacks?: boolean;
  /** Most frames kept per stack (default 32). */
  maxFrames?: number;
}

/** What happened, for `subscribe` listeners; `allocated`/`reserved` are the device's figures after it. */
export interface WebGPUMemoryEvent {
  type: 'create' | 'destroy' | 'gc' | 'pooled' | 'in-use' | 'tag' | 'step' | 'marker' | 'device';
  device: string;
  resource?: Readonly<ResourceRecord>;
  name?: string;
  allocated: number;
  reserved: number;
}

export type WebGPUMemoryListener = (event: WebGPUMemoryEvent) => void;

/** An `external_annotations` entry of a PyTorch snapshot: steps as START/END, markers as MARK. */
export interface Annotation {
  stage: 'START' | 'END' | 'MARK';
  name: string;
  device: number;
  time_us: number;
}

const MAX_WARNINGS = 200;
const MAX_ANNOTATIONS = 100_000;

export class WebGPURecorder {
  protected readonly deviceList: DeviceRecord[] = [];
  private readonly deviceOf = new WeakMap<object, DeviceRecord>();
  /** Devices destroyed or lost: what they create afterwards is invalid and holds no memory. */
  private readonly gone = new WeakSet<DeviceRecord>();
  private readonly resourceOf = new WeakMap<object, ResourceRecord>();
  /** Live resources by id, for the finalizer (which is given only the id). */
  private readonly liveById = new Map<number, ResourceRecord>();
  private readonly registry: FinalizationRegistry<number> | undefined;
  private readonly patches = new PatchSet();
  private readonly listeners = new Set<WebGPUMemoryListener>();
  private readonly attributions: Attribution[] = [];
  private currentStep: string | undefined;
  private nextId = 1;
  private active = true;
  private readonly maxFrames: number;
  protected readonly history: HistoryState;
  protected readonly annotations: Annotation[] = [];
  /** What memscope could not record, one line each (at most 200, each once). */
  readonly warnings: string[] = [];

  constructor(options: InstallOptions = {}) {
    this.history = { enabled: null, maxEntries: 0, stacks: options.stacks ?? true };
    this.maxFrames = options.maxFrames ?? 32;
    const FR = (globalThis as { FinalizationRegistry?: typeof FinalizationRegistry }).FinalizationRegistry;
    this.registry = FR ? new FR<number>((id) => this.safely('garbage collection', () => this.collected(id))) : undefined;
    const classes = options.classes ?? pageClasses();
    try {
      this.patchAll(classes);
    } catch (err) {
      this.patches.restore();
      throw err;
    }
  }

  // ------------------------------------------------------------------ patches

  private patchAll(c: WebGPUClasses): void {
    if (!c.GPUDevice) throw new MemscopeError('no-webgpu', 'memscope/webgpu: this page has no GPUDevice class (no WebGPU, or not a secure context)');
    const rec = this;
    this.patches.replace<(...a: unknown[]) => unknown>(c.GPUAdapter?.prototype, 'requestDevice', (original) =>
      function requestDevice(this: unknown) {
        const p = Reflect.apply(original, this, arguments) as Promise<DeviceLike>;
        if (!rec.active || !p || typeof (p as { then?: unknown }).then !== 'function') return p;
        return p.then((device) => {
          rec.safely('requestDevice', () => rec.track(device));
          return device;
        });
      },
    );
    const creator = (kind: ResourceKind) => (original: (...a: unknown[]) => unknown) => {
      const wrapper = function (this: DeviceLike, descriptor: unknown) {
        const result = Reflect.apply(original, this, arguments);
        if (rec.active) rec.safely(`${wrapper.name}`, () => rec.created(kind, this, descriptor, result, wrapper));
        return result;
      };
      Object.defineProperty(wrapper, 'name', { value: original.name || `create${kind[0]!.toUpperCase()}${kind.slice(1)}` });
      return wrapper;
    };
    const deviceProto = c.GPUDevice.prototype;
    this.patches.replace(deviceProto, 'createBuffer', creator('buffer'));
    this.patches.replace(deviceProto, 'createTexture', creator('texture'));
    this.patches.replace(deviceProto, 'createQuerySet', creator('querySet'));
    this.patches.replace<(...a: unknown[]) => unknown>(deviceProto, 'destroy', (original) =>
      function destroy(this: object) {
        const result = Reflect.apply(original, this, arguments);
        if (rec.active) rec.safely('GPUDevice.destroy', () => rec.deviceDestroyed(this, destroy));
        return result;
      },
    );
    for (const cls of [c.GPUBuffer, c.GPUTexture, c.GPUQuerySet]) {
      this.patches.replace<(...a: unknown[]) => unknown>(cls?.prototype, 'destroy', (original) =>
        function destroy(this: object) {
          const result = Reflect.apply(original, this, arguments);
          if (rec.active) rec.safely('destroy', () => rec.destroyed(this, destroy));
          return result;
        },
      );
    }
  }

  /** Puts every patched method back (the same functions as before install) and stops recording. */
  uninstall(): void {
    this.active = false;
    this.patches.restore();
    this.listeners.clear();
  }

  get installed(): boolean {
    return this.active;
  }

  // ------------------------------------------------------------------ devices

  /**
   * Records a device created before install (devices from `requestDevice` after install are
   * tracked by themselves). Returns its name, `webgpu:N` in the order devices were tracked.
   */
  track(device: object): string {
    if (device === null || typeof device !== 'object') throw new MemscopeError('bad-argument', 'track(device): expected a GPUDevice');
    const known = this.deviceOf.get(device);
    if (known) return known.name;
    const label = (device as DeviceLike).label;
    const record = new DeviceRecord(this.deviceList.length, typeof label === 'string' ? label : '', this.history);
    this.deviceList.push(record);
    this.deviceOf.set(device, record);
    // A lost device (destroyed, or the GPU process reset) holds no memory any more.
    const lost = (device as { lost?: unknown }).lost;
    if (lost instanceof Promise) {
      lost.then(
        () => this.safely('device loss', () => {
          this.gone.add(record);
          this.freeAll(record, []);
        }),
        () => undefined,
      );
    }
    this.emit('device', record);
    return record.name;
  }

  /** The device record for a device argument: an index, 'webgpu:N', 'webgpu' (0) or the GPUDevice itself. */
  protected deviceRecord(device: number | string | object | undefined): DeviceRecord {
    let index: number;
    if (device === undefined || device === 'webgpu') index = 0;
    else if (typeof device === 'number') index = device;
    else if (typeof device === 'string') {
      const m = /^webgpu:(\d+)$/.exec(device);
      if (!m) throw new MemscopeError('bad-device', `unknown device ${JSON.stringify(device)}; expected an index, 'webgpu:N' or a tracked GPUDevice`);
      index = Number(m[1]);
    } else {
      const r = this.deviceOf.get(device);
      if (!r) throw new MemscopeError('bad-device', 'this GPUDevice is not tracked: it was created before install; call track(device)');
      return r;
    }
    // Before any device exists, device 0 reads as an empty device (torch.cuda.memory_allocated() is 0 before CUDA starts).
    if (index === 0 && this.deviceList.length === 0) return new DeviceRecord(0, '', this.history);
    const r = this.deviceList[index];
    if (!r) throw new MemscopeError('bad-device', `device ${String(device)} does not exist (${this.deviceList.length} WebGPU device(s) tracked)`);
    return r;
  }

  // ------------------------------------------------------------------ recording

  private created(kind: ResourceKind, device: DeviceLike, descriptor: unknown, result: unknown, above: Function): void {
    const dev = this.deviceOf.get(device);
    // A destroyed or lost device makes invalid resources, which hold no memory.
    if (!dev || this.gone.has(dev) || result === null || typeof result !== 'object') return;
    const res = result as ResourceLike;
    const d = (descriptor ?? {}) as Record<string, unknown>;
    const label = typeof res.label === 'string' ? res.label : typeof d.label === 'string' ? d.label : '';
    let bytes: number;
    let shape = '';
    if (kind === 'buffer') {
      bytes = typeof res.size === 'number' ? res.size : Number((d as unknown as BufferDescriptorLike).size);
      const max = device.limits?.maxBufferSize;
      if (typeof max === 'number' && bytes > max) {
        this.warn(`buffer ${JSON.stringify(label)} of ${bytes} bytes is over the device's maxBufferSize (${max}): WebGPU makes it an invalid buffer with no memory; not counted`);
        return;
      }
    } else if (kind === 'texture') {
      const s = textureShape(d as unknown as TextureDescriptorLike, res);
      const t = textureBytes(s);
      if (t.unknownFormat) this.warn(`texture format ${JSON.stringify(s.format)} unknown to memscope: counted as 4 bytes a texel`);
      bytes = t.bytes;
      shape = `${s.format} ${s.width}×${s.height}×${s.depthOrArrayLayers}${s.dimension === '2d' ? '' : ` ${s.dimension}`}`;
      if (s.mipLevelCount > 1) shape += ` ${s.mipLevelCount} mips`;
      if (s.sampleCount > 1) shape += ` ${s.sampleCount}× samples`;
    } else {
      const q = d as unknown as QuerySetDescriptorLike;
      const count = typeof res.count === 'number' ? res.count : Number(q.count);
      // Each query result is a 64-bit value (occlusion counts and timestamps alike).
      bytes = count * 8;
      shape = `${typeof res.type === 'string' ? res.type : String(q.type)} ×${count}`;
    }
    if (!(Number.isSafeInteger(bytes) && bytes >= 0)) {
      this.warn(`${kind} ${JSON.stringify(label)}: size ${String(bytes)} is not a byte count; not counted`);
      return;
    }
    const usage = typeof res.usage === 'number' ? res.usage : typeof d.usage === 'number' ? d.usage : 0;
    const record: ResourceRecord = {
      id: this.nextId++,
      kind,
      device: dev.index,
      address: dev.takeAddress(bytes),
      bytes,
      usage,
      label,
      shape,
      frames: this.stack(above),
      timeUs: nowUs(),
      attribution: this.currentAttribution(),
      inUse: true,
    };
    dev.add(record);
    this.resourceOf.set(res, record);
    this.liveById.set(record.id, record);
    this.registry?.register(res, record.id, res);
    this.emit('create', dev, record);
  }

  private stack(above: Function): Frame[] {
    return this.history.stacks ? pageStack(above, this.maxFrames) : [];
  }

  /** The stack of a free: only the trace keeps it, so it is captured only while the trace is on. */
  private freeStack(above: Function): Frame[] {
    return this.history.enabled === 'all' ? this.stack(above) : [];
  }

  private free(resource: object, record: ResourceRecord, reason: FreeReason, frames: Frame[]): void {
    const dev = this.deviceList[record.device]!;
    this.liveById.delete(record.id);
    this.registry?.unregister(resource);
    dev.remove(record, reason, nowUs(), frames);
    this.emit(reason === 'gc' ? 'gc' : 'destroy', dev, record);
  }

  private destroyed(resource: object, above: Function): void {
    const record = this.resourceOf.get(resource);
    if (!record || record.freedBy !== undefined) return;
    this.free(resource, record, 'destroy', this.freeStack(above));
  }

  private deviceDestroyed(device: object, above: Function): void {
    const dev = this.deviceOf.get(device);
    if (!dev) return;
    this.gone.add(dev);
    this.freeAll(dev, this.freeStack(above));
  }

  private freeAll(dev: DeviceRecord, frames: Frame[]): void {
    const timeUs = nowUs();
    for (const record of [...dev.live.values()]) {
      this.liveById.delete(record.id);
      dev.remove(record, 'device-lost', timeUs, frames);
      this.emit('destroy', dev, record);
    }
  }

  /** The finalizer: a resource the page dropped without destroy() was garbage-collected. */
  private collected(id: number): void {
    const record = this.liveById.get(id);
    if (!record) return;
    this.liveById.delete(id);
    const dev = this.deviceList[record.device]!;
    dev.remove(record, 'gc', nowUs(), []);
    this.emit('gc', dev, record);
  }

  // ------------------------------------------------------------------ attribution

  /** Runs `fn` with `attribution` on every resource created inside it (synchronously); returns its result. */
  withAttribution<T>(attribution: Attribution, fn: () => T): T {
    const end = this.beginAttribution(attribution);
    try {
      return fn();
    } finally {
      end();
    }
  }

  /**
   * Tags every resource created from now until the returned function is called: for work that
   * spans `await`s (a session's creation, a step). Everything the page creates meanwhile is tagged.
   */
  beginAttribution(attribution: Attribution): () => void {
    const entry = { ...attribution };
    this.attributions.push(entry);
    return () => {
      const i = this.attributions.lastIndexOf(entry);
      if (i >= 0) this.attributions.splice(i, 1);
    };
  }

  private currentAttribution(): Attribution {
    const out: Attribution = {};
    if (this.currentStep !== undefined) out.step = this.currentStep;
    for (const a of this.attributions) Object.assign(out, definedOnly(a));
    return out;
  }

  /** Tags a resource after it was created (fields given replace the resource's). */
  tag(resource: object, attribution: Attribution): void {
    const record = this.resourceOf.get(resource);
    if (!record) return;
    record.attribution = { ...record.attribution, ...definedOnly(attribution) };
    this.emit('tag', this.deviceList[record.device]!, record);
  }

  /** A framework's pool took the buffer back: reserved, no longer allocated. */
  markPooled(resource: object): void {
    this.setInUse(resource, false, 'pooled');
  }

  /**
   * A framework's pool handed the buffer out again: allocated. The trace's `alloc` carries the
   * stack of this call (above `caller`, when the framework's own wrapper names itself), as a
   * creation's does: a buffer the pool hands out is where the program's memory went.
   */
  markInUse(resource: object, caller?: Function): void {
    this.setInUse(resource, true, 'in-use', caller ?? this.markInUse);
  }

  private setInUse(resource: object, inUse: boolean, type: 'pooled' | 'in-use', above?: Function): void {
    const record = this.resourceOf.get(resource);
    if (!record || record.freedBy !== undefined || record.inUse === inUse) return;
    const dev = this.deviceList[record.device]!;
    dev.setInUse(record, inUse, inUse && above !== undefined && this.history.enabled === 'all' ? this.stack(above) : []);
    this.emit(type, dev, record);
  }

  /** The record of a resource memscope saw created (undefined for others). */
  resourceRecord(resource: object): Readonly<ResourceRecord> | undefined {
    return this.resourceOf.get(resource);
  }

  /** Starts a step (ending the one before): resources created until the next step carry its name. */
  step(name: string | number): void {
    const time = nowUs();
    if (this.currentStep !== undefined) this.annotate('END', this.currentStep, time);
    this.currentStep = String(name);
    this.annotate('START', this.currentStep, time);
    this.emitAll('step', this.currentStep);
  }

  /** Ends the current step, if any. */
  endStep(): void {
    if (this.currentStep === undefined) return;
    this.annotate('END', this.currentStep, nowUs());
    this.emitAll('step', this.currentStep);
    this.currentStep = undefined;
  }

  /** A named point in time (saved in the snapshot's external_annotations). */
  marker(name: string): void {
    this.annotate('MARK', name, nowUs());
    this.emitAll('marker', name);
  }

  private annotate(stage: Annotation['stage'], name: string, time: number): void {
    if (this.annotations.length >= MAX_ANNOTATIONS) this.annotations.shift();
    // Annotations belong to every device: PyTorch's device -1.
    this.annotations.push({ stage, name, device: -1, time_us: time });
  }

  // ------------------------------------------------------------------ events

  /** Calls `listener` after every change; returns the function that stops it. A throwing listener becomes a warning. */
  subscribe(listener: WebGPUMemoryListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(type: WebGPUMemoryEvent['type'], dev: DeviceRecord, resource?: ResourceRecord, name?: string): void {
    if (this.listeners.size === 0) return;
    const event: WebGPUMemoryEvent = {
      type,
      device: dev.name,
      resource,
      name,
      allocated: dev.stats.allocated_bytes[0].current,
      reserved: dev.stats.reserved_bytes[0].current,
    };
    for (const l of [...this.listeners]) this.safely('a subscribe() listener', () => l(event));
  }

  private emitAll(type: 'step' | 'marker', name: string): void {
    if (this.deviceList.length === 0) return;
    for (const dev of this.deviceList) this.emit(type, dev, undefined, name);
  }

  /** Runs memscope's own work; a failure becomes a warning and never reaches the page. */
  protected safely(where: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.warn(`memscope failed while recording ${where}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  protected warn(message: string): void {
    if (this.warnings.length >= MAX_WARNINGS || this.warnings.includes(message)) return;
    this.warnings.push(message);
  }
}

function definedOnly(a: Attribution): Attribution {
  const out: Attribution = {};
  for (const key of ['category', 'framework', 'operator', 'step'] as const) if (a[key] !== undefined) out[key] = String(a[key]);
  return out;
}

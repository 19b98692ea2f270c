import { CAPTURE_FORMAT, CAPTURE_VERSION, TAG, type CaptureEndInfo, type CaptureHeader, type DeviceCategoryBytes, type ModuleStates } from './types.js';

/** Where capture text goes. The Node side writes to a file descriptor; tests collect into a string. */
export interface CaptureSink {
  write(chunk: string): void;
}

/** Buffered characters above which the writer flushes on its own. */
const AUTO_FLUSH_CHARS = 1 << 18;

/**
 * Emits capture records as NDJSON lines with interned strings and stacks.
 * Records are buffered and handed to the sink on `flush()` (called by the
 * owner periodically and at step ends) or when the buffer grows past 256 KiB,
 * so a killed process loses at most what was buffered since the last flush.
 */
export class CaptureWriter {
  private readonly strings = new Map<string, number>();
  private readonly stacks = new Map<string, number>();
  private buffer: string[] = [];
  private buffered = 0;
  private closed = false;

  constructor(
    private readonly sink: CaptureSink,
    header: Omit<CaptureHeader, 'format' | 'version' | 'clock'>,
  ) {
    const full: CaptureHeader = { format: CAPTURE_FORMAT, version: CAPTURE_VERSION, clock: 'ms', ...header };
    this.push(JSON.stringify(full));
    this.flush();
  }

  /** The id of `text`, declaring it first if new; 0 for null/empty. */
  str(text: string | null | undefined): number {
    if (!text) return 0;
    let id = this.strings.get(text);
    if (id === undefined) {
      id = this.strings.size + 1;
      this.strings.set(text, id);
      this.push(`["${TAG.string}",${id},${JSON.stringify(text)}]`);
    }
    return id;
  }

  /**
   * The id of a stack given as a key (same key, same stack) and a function
   * that makes its frames, called only the first time the key is seen.
   */
  stack(raw: string | null, frames: (raw: string) => string[]): number {
    if (!raw) return 0;
    let id = this.stacks.get(raw);
    if (id === undefined) {
      const ids = frames(raw).map((f) => this.str(f));
      id = this.stacks.size + 1;
      this.stacks.set(raw, id);
      this.push(`["${TAG.stack}",${id},[${ids.join(',')}]]`);
    }
    return id;
  }

  module(id: number, path: string, className: string, parentId: number): void {
    this.push(`["${TAG.module}",${id},${this.str(path)},${this.str(className)},${parentId}]`);
  }

  alloc(t: number, storageId: number, device: number, bytes: number, category: number, layer: number, phase: number, kernel: number, stack: number, step: number): void {
    this.push(`["a",${t},${storageId},${device},${bytes},${category},${layer},${phase},${kernel},${stack},${step}]`);
  }

  /** The allocating stack of a storage whose alloc record was written without one. */
  allocStack(storageId: number, stack: number): void {
    this.push(`["${TAG.allocStack}",${storageId},${stack}]`);
  }

  /** A step end that is not an optimizer step (`kind`: a string id). */
  mark(t: number, kind: number): void {
    this.push(`["${TAG.mark}",${t},${kind}]`);
  }

  free(t: number, storageId: number): void {
    this.push(`["f",${t},${storageId}]`);
  }

  category(storageId: number, category: number): void {
    this.push(`["c",${storageId},${category}]`);
  }

  stepEnd(t: number, step: number, live: DeviceCategoryBytes): void {
    this.push(`["${TAG.step}",${t},${step},${JSON.stringify(live)}]`);
  }

  moduleState(moduleId: number, states: ModuleStates): void {
    this.push(`["${TAG.moduleState}",${moduleId},${JSON.stringify(states)}]`);
  }

  kernel(name: string, calls: number, bytesAllocated: number, bytesRetained: number, peakAdded: number): void {
    this.push(`["${TAG.kernel}",${this.str(name)},${calls},${bytesAllocated},${bytesRetained},${peakAdded}]`);
  }

  end(t: number, info: CaptureEndInfo): void {
    if (this.closed) return;
    this.push(`["${TAG.end}",${t},${JSON.stringify(info)}]`);
    this.flush();
    this.closed = true;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  flush(): void {
    if (this.buffer.length === 0) return;
    const chunk = this.buffer.join('\n') + '\n';
    this.buffer = [];
    this.buffered = 0;
    this.sink.write(chunk);
  }

  private push(line: string): void {
    if (this.closed) return;
    this.buffer.push(line);
    this.buffered += line.length;
    if (this.buffered > AUTO_FLUSH_CHARS) this.flush();
  }
}

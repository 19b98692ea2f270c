/** The device trace as readable lines, like `_memory_viz.py trace`. */
import { humanBytes as formatHumanBytes } from '../../core/units.js';
import type { MemorySnapshot } from '../snapshot.js';
import { deviceLabel } from '../device-type.js';
import { frameLabels } from './frame-labels.js';
import { outOfMemoryEvents, type OomEvent } from './out-of-memory.js';

/**
 * The trace as readable lines (`_memory_viz.py trace`): allocations get short
 * names (a, b, …, reused after their free completes), addresses are shown as
 * offsets into the segment that holds them.
 */
export function traceLines(snapshot: MemorySnapshot, options: { frames?: boolean } = {}): string[] {
  const out: string[] = [];
  emitTraceLines(snapshot, options, (line) => out.push(line));
  return out;
}

/**
 * traceLines one line at a time, in order: a caller that writes them out as they come holds no
 * array of every line (on a large trace, keeping them all costs more in garbage collection than
 * making them).
 */
export function emitTraceLines(snapshot: MemorySnapshot, options: { frames?: boolean }, emit: (line: string) => void): void {
  const l = frameLabels(snapshot);
  // Traces repeat a few sizes many times: each is formatted once.
  const sizeText = new Map<number, string>();
  const humanBytes = (n: number): string => {
    let t = sizeText.get(n);
    if (t === undefined) {
      t = formatHumanBytes(n);
      sizeText.set(n, t);
    }
    return t;
  };
  /** OOM details by `device:index`, made at the first `oom` entry; the lines that follow its line. */
  let ooms: Map<string, OomEvent> | undefined;
  const oomLines: string[] = [];
  // CUDA's files read as `_memory_viz.py trace` prints them; another device type's segments are
  // its own resources (a WebGPU buffer or texture), made and released by its own calls.
  const cuda = snapshot.deviceType === 'cuda';
  const segmentMade = cuda ? 'cudaMalloc' : 'create';
  const segmentReleased = cuda ? 'cudaFree' : 'destroy';
  for (const trace of snapshot.traces) {
    if (trace.count === 0) continue;
    emit(`Device ${cuda ? trace.device : deviceLabel(snapshot.deviceType, trace.device)} ---------------- ${trace.count} entries`);
    const free: string[] = [];
    let next = 0;
    const newName = (): string => {
      const reused = free.pop();
      if (reused !== undefined) return reused;
      const n = next++;
      return String.fromCharCode(97 + (n % 26)) + (n >= 26 ? String(Math.floor(n / 26)) : '');
    };
    const allocations = new Map<number, string>();
    // Segments the trace allocated (oldest first among equal addresses) and the end state's, both by
    // address: each allocation finds its segment by binary search, not by a scan of every segment.
    const liveSegments: { name: string; addr: number; size: number }[] = [];
    const segmentNames = new Map<number, string>();
    const known = snapshot.segments.filter((s) => s.device === trace.device).sort((a, b) => a.address - b.address || a.index - b.index);
    /** Index of the last element whose start is ≤ addr (-1 when none). */
    const lastAtOrBelow = (n: number, start: (k: number) => number, addr: number): number => {
      let lo = 0;
      let hi = n - 1;
      let at = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (start(mid) <= addr) {
          at = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      return at;
    };
    /** The segment holding addr, left in segmentName / segmentAddress (no pair made per allocation); false when none. */
    let segmentName = '';
    let segmentAddress = 0;
    const findSegment = (addr: number): boolean => {
      let k = lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr);
      while (k > 0 && liveSegments[k - 1].addr === liveSegments[k].addr) k--;
      if (k >= 0 && addr < liveSegments[k].addr + liveSegments[k].size) {
        segmentName = liveSegments[k].name;
        segmentAddress = liveSegments[k].addr;
        return true;
      }
      let j = lastAtOrBelow(known.length, (x) => known[x].address, addr);
      while (j > 0 && known[j - 1].address === known[j].address) j--;
      if (j >= 0 && addr < known[j].address + known[j].totalSize) {
        segmentName = `seg_${known[j].index}`;
        segmentAddress = known[j].address;
        return true;
      }
      return false;
    };
    let live = 0;
    for (let i = 0; i < trace.count; i++) {
      const action = snapshot.actionNames[trace.action[i]!]!;
      const addr = trace.addr[i]!;
      const size = trace.size[i]!;
      let line: string;
      switch (action) {
        case 'alloc': {
          const name = newName();
          line = findSegment(addr)
            ? `${name} = ${segmentName}[${addr - segmentAddress}:${humanBytes(size)}]`
            : `${name} = MEM[0x${addr.toString(16)}:${humanBytes(size)}]`;
          allocations.set(addr, name);
          live += size;
          break;
        }
        case 'free_requested':
          line = `del ${allocations.get(addr) ?? `0x${addr.toString(16)}`} # ${humanBytes(size)}`;
          break;
        case 'free_completed': {
          const name = allocations.get(addr);
          line = `# free completed for ${name ?? `0x${addr.toString(16)}`} ${humanBytes(size)}`;
          live -= size;
          if (name !== undefined) {
            allocations.delete(addr);
            free.push(name);
          }
          break;
        }
        case 'segment_alloc': {
          const name = newName();
          line = `${name} = ${segmentMade}(0x${addr.toString(16)}, ${humanBytes(size)})`;
          liveSegments.splice(lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr) + 1, 0, { name, addr, size });
          segmentNames.set(addr, name);
          break;
        }
        case 'segment_free': {
          const name = segmentNames.get(addr);
          line = `${segmentReleased}(${name ?? `0x${addr.toString(16)}`}) # ${humanBytes(size)}`;
          if (name !== undefined) {
            segmentNames.delete(addr);
            let k = lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr);
            while (k > 0 && liveSegments[k - 1].addr === addr) k--;
            if (k >= 0 && liveSegments[k].addr === addr) liveSegments.splice(k, 1);
            free.push(name);
          }
          break;
        }
        case 'segment_map':
          line = `cuMemMap(0x${addr.toString(16)}, ${humanBytes(size)})`;
          break;
        case 'segment_unmap':
          line = `cuMemUnmap(0x${addr.toString(16)}, ${humanBytes(size)})`;
          break;
        case 'oom': {
          const df = trace.deviceFree ? trace.deviceFree[i]! : NaN;
          line = `raise OutOfMemoryError() # ${humanBytes(size)} requested, ${Number.isNaN(df) ? '?' : humanBytes(df)} free on the device`;
          ooms ??= new Map(outOfMemoryEvents(snapshot, 3, 2).map((o) => [`${o.device}:${o.index}`, o]));
          const o = ooms.get(`${trace.device}:${i}`);
          if (o) {
            line += `; allocated ${humanBytes(o.allocated)}, reserved ${humanBytes(o.reserved)}`;
            for (const a of o.largestLive) oomLines.push(`#   live then: ${humanBytes(a.size)} at 0x${a.address.toString(16)}${a.frames.length ? ` @ ${a.frames.join(' ← ')}` : ''}`);
          }
          break;
        }
        case 'snapshot':
          line = '# snapshot taken';
          break;
        case 'annotate': {
          const id = trace.userMetadata ? trace.userMetadata[i]! : -1;
          line = `# annotate ${allocations.get(addr) ?? `0x${addr.toString(16)}`}: ${id >= 0 ? JSON.stringify(snapshot.strings[id]) : '(no user_metadata)'}`;
          break;
        }
        default:
          line = `# ${action} 0x${addr.toString(16)} ${humanBytes(size)}`;
      }
      if (options.frames) {
        const top = l.top(trace.stack[i]!, 1)[0];
        if (top) line += `    @ ${top}`;
      }
      emit(line);
      if (oomLines.length > 0) {
        for (const o of oomLines) emit(o);
        oomLines.length = 0;
      }
    }
    emit(`net change over the trace: ${humanBytes(live)} (allocations minus completed frees)`);
  }
}

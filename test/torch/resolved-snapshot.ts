// Test helper: a snapshot model in plain values, for comparing two ways of reading one file.
import { blockAt, stackFrames, traceEventAt, type MemorySnapshot } from '../../src/torch/snapshot.js';

/** Everything in the model with stacks resolved to frames, so two readers can be compared. */
export function resolved(s: MemorySnapshot): unknown {
  return {
    segments: s.segments.map((g) => ({ ...g, stack: stackFrames(s, g.stack) })),
    blocks: Array.from({ length: s.blocks.count }, (_, i) => ({ ...blockAt(s, i), stack: stackFrames(s, s.blocks.stack[i]!) })),
    traces: s.traces.map((t) => Array.from({ length: t.count }, (_, i) => ({ ...traceEventAt(s, t, i), stack: stackFrames(s, t.stack[i]!) }))),
    allocatorSettings: s.allocatorSettings,
    externalAnnotations: s.externalAnnotations,
    format: s.format,
    extra: s.extra,
    warnings: s.warnings,
  };
}

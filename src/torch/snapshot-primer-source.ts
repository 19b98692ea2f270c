/**
 * The source of the primer snapshot (snapshot-primer.ts says what it is for). Its bytes are kept,
 * written out, in snapshot-primer-data.ts: writing them at run time would cost a fresh process
 * ~30 ms of cold writer code, more than the primer saves. `npm run gen:primer` rewrites that file
 * from this one; test/torch/snapshot-primer.test.ts fails when the two disagree.
 *
 * The snapshot has PyTorch's layout (memscope's writer writes the opcodes `_dump_snapshot` files
 * use) and made-up frames: nothing of a real program is in it.
 */
import { makeTuple } from './pickle/builder.js';
import { writePickle } from './pickle/writer.js';

/** Distinct frames: more than 256, so later references to them are LONG_BINGETs as in big files. */
const FRAME_COUNT = 300;
/** Trace entries; more make the primer cost more to read than they save (docs/PICKLE.md, "The primer"). */
const TRACE_ENTRIES = 300;
const SEGMENTS = 24;
const GiB = 2 ** 30;

/** The primer, pickled. */
export function writePrimerSnapshot(): Uint8Array {
  return writePickle(primerSnapshot());
}

/** The primer as a value: segments with blocks in every state, and a trace of every action. */
export function primerSnapshot(): Map<string, unknown> {
  const frames: Map<string, unknown>[] = [];
  for (let i = 0; i < FRAME_COUNT; i++) {
    frames.push(
      new Map<string, unknown>([
        ['name', `fn_${i}`],
        ['filename', i % 3 === 0 ? `lib/module_${i % 7}.cpp` : `model/layer_${i % 11}.py`],
        ['line', i % 5 === 0 ? 70000 + i : i + 1],
      ]),
    );
  }
  // Deterministic stacks of 0–12 frames from all over the frame list (so both BINGET and
  // LONG_BINGET indices appear); a stack is sometimes reused as the same list (a memo GET of the
  // list) and sometimes as an equal new list (the lane's cache of index sequences).
  let seed = 12345;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
    return seed % n;
  };
  const stacks: Map<string, unknown>[][] = [];
  for (let s = 0; s < 40; s++) {
    const length = s === 0 ? 0 : s === 1 ? 1 : 2 + next(11);
    const stack: Map<string, unknown>[] = [];
    for (let k = 0; k < length; k++) stack.push(frames[next(FRAME_COUNT)]!);
    stacks.push(stack);
  }
  const stackFor = (i: number): Map<string, unknown>[] => {
    const s = stacks[i % stacks.length]!;
    return i % 4 === 0 ? s : [...s];
  };

  const states = ['active_allocated', 'inactive', 'active_pending_free'];
  const segments: Map<string, unknown>[] = [];
  for (let s = 0; s < SEGMENTS; s++) {
    // Addresses of 6 and 7 bytes, and 7-byte ones whose low 32 bits pass 2^31 (LONG1 decoding
    // has a path for each; CUDA addresses reach all three).
    const address = s % 3 === 0 ? 139 * GiB + s * 64 * 2 ** 20 : s % 3 === 1 ? 2 ** 47 + s * 2 ** 33 : 2 ** 47 + 2 ** 31 + s * 2 ** 33;
    const blockCount = 1 + (s % 4);
    const blockSize = [512, 20480, 2 ** 20, 3 * GiB][s % 4]!;
    const blocks: Map<string, unknown>[] = [];
    for (let b = 0; b < blockCount; b++) {
      blocks.push(
        new Map<string, unknown>([
          ['address', address + b * blockSize],
          ['size', blockSize],
          ['requested_size', b % 2 === 0 ? blockSize : blockSize - 1],
          ['state', states[(s + b) % states.length]],
          ['frames', stackFor(s * 4 + b)],
        ]),
      );
    }
    const total = blockSize * blockCount;
    const entries: [string, unknown][] = [
      ['device', 0],
      ['address', address],
      ['total_size', total],
      ['allocated_size', total - blockSize],
      ['active_size', total],
      ['requested_size', total - 1],
      ['stream', s % 5 === 0 ? 140000000000 + s : 0],
      ['segment_type', s % 2 === 0 ? 'large' : 'small'],
      ['segment_pool_id', makeTuple([0, s % 3])],
      ['is_expandable', false],
    ];
    // Both key orders PyTorch has written: blocks then frames, and frames then blocks.
    if (s % 2 === 0) entries.push(['blocks', blocks], ['frames', stackFor(s + 7)]);
    else entries.push(['frames', stackFor(s + 7)], ['blocks', blocks]);
    segments.push(new Map(entries));
  }

  const actions = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap'];
  const trace: Map<string, unknown>[] = [];
  for (let i = 0; i < TRACE_ENTRIES; i++) {
    const entry = new Map<string, unknown>([
      ['action', actions[i % actions.length]],
      ['addr', (i % 2 === 0 ? 139 * GiB : 2 ** 47 + 2 ** 31) + i * 4096],
      ['size', [0, 200, 40000, 2 ** 24, 5 * GiB][i % 5]],
      ['stream', 0],
      ['time_us', 1_700_000_000_000_000 + i * 37],
    ]);
    // Newer files add these two strings to every entry.
    if (i >= TRACE_ENTRIES / 2) entry.set('compile_context', 'N/A').set('user_metadata', i % 9 === 0 ? `step ${i}` : '');
    entry.set('frames', stackFor(i));
    trace.push(entry);
  }
  trace.push(new Map<string, unknown>([['action', 'oom'], ['addr', 0], ['size', 2 ** 20], ['stream', 0], ['time_us', 1_700_000_000_100_000], ['device_free', 1024], ['frames', []]]));

  return new Map<string, unknown>([
    ['segments', segments],
    ['device_traces', [trace]],
    [
      'allocator_settings',
      new Map<string, unknown>([
        ['PYTORCH_CUDA_ALLOC_CONF', ''],
        ['max_split_size', -1],
        ['expandable_segments', false],
        ['roundup_power2_divisions', new Map<string, unknown>([['1', 0], ['2', 0], ['4', 0]])],
      ]),
    ],
    [
      'external_annotations',
      ['START', 'END'].map((stage, i) => new Map<string, unknown>([['stage', stage], ['name', 'Optimizer.step'], ['device', 0], ['time_us', 1_700_000_000_000_000 + i]])),
    ],
  ]);
}

// Run by scripts/test-package.mjs inside a fresh app that installed memscope's tarball and no
// TensorFlow.js: every other entry loads and works, and memscope/tfjs imports but refuses to
// track with one line that says what to load. Exits 1 at the first check that fails.
// Usage: node no-tfjs-check.mjs <small_3seg.pickle>
import { readFileSync } from 'node:fs';
import { formatBytes } from 'memscope';
import { DeviceMemory } from 'memscope/allocator';
import { MemTracker } from 'memscope/tfjs';
import { readSnapshot } from 'memscope/torch';

function check(ok, what) {
  if (!ok) {
    process.stderr.write(`no-tfjs-check: FAILED ${what}\n`);
    process.exit(1);
  }
  process.stdout.write(`ok ${what}\n`);
}

for (const entry of ['memscope', 'memscope/analysis', 'memscope/node']) {
  const exported = Object.keys(await import(entry));
  check(exported.length > 0, `${entry} loads without TFJS (${exported.length} exports)`);
}

const snapshot = readSnapshot(new Uint8Array(readFileSync(process.argv[2])));
check(snapshot.segments.length === 3, `readSnapshot (memscope/torch) reads 3 segments without TFJS (got ${snapshot.segments.length})`);

const device = new DeviceMemory();
device.cachingAllocatorAlloc(1000);
check(device.memoryReserved() === 2 * 1024 * 1024, `DeviceMemory (memscope/allocator) reserves one 2 MiB small segment (got ${formatBytes(device.memoryReserved(), 'MiB')})`);

let refusal;
try {
  new MemTracker().start();
} catch (err) {
  refusal = err;
}
check(
  refusal?.name === 'MemscopeError' && /TensorFlow\.js/.test(refusal.message) && !refusal.message.includes('\n'),
  `MemTracker (memscope/tfjs) without TFJS refuses in one line: ${refusal?.message}`,
);

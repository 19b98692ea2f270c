// A long training run's capture, made from a real one: test/fixtures/captures/train-leak.capture.ndjson
// (a TFJS training script with a leak, written by `memscope run --stacks`) keeps its first step,
// then its second step is repeated with fresh storage ids and later times until the file reaches
// the size asked for, then its closing kernel and module records. Every repeat leaks as the real
// step does, so `leaks` finds the same group growing over thousands of steps.
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

const isStepEnd = (line) => line.startsWith('["p",');

export function makeBigCapture(source, outPath, targetBytes) {
  const lines = readFileSync(source, 'utf8').split('\n').filter((l) => l !== '');
  const stepEnds = lines.flatMap((l, i) => (isStepEnd(l) ? [i] : []));
  if (stepEnds.length < 3) throw new Error(`${source}: needs three step ends to repeat a step`);
  const first = lines.slice(0, stepEnds[0] + 1);
  const block = (k) => lines.slice(stepEnds[k] + 1, stepEnds[k + 1] + 1).map((l) => JSON.parse(l));
  const step = block(0);
  const closing = lines.slice(stepEnds.at(-1) + 1).filter((l) => !l.startsWith('["e",'));
  // How far storage ids and times move from one step to the next in the real run: records that
  // name an earlier step's storage (a late stack, a new category) keep naming the right one.
  const firstAlloc = (records) => records.find((r) => r[0] === 'a');
  const idSpan = firstAlloc(block(1))[2] - firstAlloc(step)[2];
  const timeSpan = step.at(-1)[1] - JSON.parse(lines[stepEnds[0]])[1];
  const fd = openSync(outPath, 'w');
  let written = 0;
  let pending = [];
  const put = (line) => {
    pending.push(line);
    written += Buffer.byteLength(line) + 1;
    if (pending.length >= 50_000) flush();
  };
  const flush = () => {
    writeSync(fd, pending.join('\n') + '\n');
    pending = [];
  };
  for (const l of first) put(l);
  let events = 0;
  let steps = 0;
  for (let k = 0; written < targetBytes; k++) {
    const id = (x) => x + k * idSpan;
    const t = (x) => Math.round((x + k * timeSpan) * 1000) / 1000;
    for (const r of step) {
      switch (r[0]) {
        case 'a':
          put(JSON.stringify(['a', t(r[1]), id(r[2]), ...r.slice(3, 10), r[10] + k]));
          events++;
          break;
        case 'f':
          put(JSON.stringify(['f', t(r[1]), id(r[2])]));
          events++;
          break;
        case 'c':
        case 't':
          put(JSON.stringify([r[0], id(r[1]), r[2]]));
          break;
        case 'p':
          put(JSON.stringify(['p', t(r[1]), r[2] + k, r[3]]));
          steps++;
          break;
        case 'm':
          put(JSON.stringify(['m', t(r[1]), r[2]]));
          break;
        default:
          // Strings, stacks, modules and statistics: declared once, by the first repeat.
          if (k === 0) put(JSON.stringify(r));
          break;
      }
    }
  }
  for (const l of closing) put(l);
  put(JSON.stringify(['e', 0, { events, dropped: 0, exitCode: 0, error: null }]));
  flush();
  closeSync(fd);
  return { bytes: written, steps, events };
}

// Self instructions per function from a callgrind output file, with V8's JIT code named.
//
// callgrind knows JIT code only by address (its functions are named `0x…`). A process run with
// `node --perf-basic-prof` writes /tmp/perf-<pid>.map: one line per piece of code V8 made
// (start address, size, name, e.g. `JS:*applyPending file:///…/mem-recorder.js:240:17`). Each
// address-named function is looked up there, so the report can say which JS function the cost is
// in (TurboFan code is `*`, Sparkplug `^`, the interpreter's bytecode handlers are builtins).
import { readFileSync } from 'node:fs';

/** V8's optimising compilers: their share of a step moves by up to ~1 M instructions between windows. */
const COMPILER = /v8::internal::(compiler|maglev|turboshaft)::|v8::internal::Zone|RegisterAllocat|InstructionSelector|OptimizedCompilationJob/;

/** The perf map node wrote for the process behind a callgrind output file (null if the file names no pid). */
export function perfMapOf(file) {
  const pid = /^pid: (\d+)$/m.exec(readFileSync(file, 'utf8'))?.[1];
  return pid === undefined ? null : `/tmp/perf-${pid}.map`;
}

/** Reads /tmp/perf-<pid>.map: sorted [start, end, name]. */
function readPerfMap(pid) {
  let text;
  try {
    text = readFileSync(`/tmp/perf-${pid}.map`, 'utf8');
  } catch {
    return [];
  }
  const entries = [];
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (m) {
      const start = parseInt(m[1], 16);
      entries.push([start, start + parseInt(m[2], 16), m[3]]);
    }
  }
  return entries.sort((a, b) => a[0] - b[0]);
}

function lookUp(entries, addr) {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid][0] <= addr) lo = mid + 1;
    else hi = mid - 1;
  }
  const e = entries[hi];
  return e !== undefined && addr < e[1] ? e[2] : null;
}

/** A JS function's name without the directory of its file, e.g. `JS:*applyPending mem-recorder.js:240`. */
function shortName(name) {
  return name.replace(/ (file:\/\/)?\/\S*\/([^/\s]+?)(:\d+)(:\d+)?$/, ' $2$3');
}

/**
 * Self instructions (Ir, callgrind's first event) per function in one callgrind output file, as
 * the bench writes it (one position column: line numbers). JIT code is named through the perf map
 * of the process that wrote the file (its `pid:` line). Returns Map name → instructions; V8's
 * optimising compilers are summed under '(V8 compilers)'.
 */
export function selfInstructions(file) {
  const text = readFileSync(file, 'utf8');
  const pid = /^pid: (\d+)$/m.exec(text)?.[1];
  const perf = pid === undefined ? [] : readPerfMap(pid);
  const names = new Map();
  const out = new Map();
  let fn = '';
  let afterCalls = false;
  const nameOf = (raw) => {
    // callgrind marks recursion levels with a suffix ('2, '3…): one function for this report.
    const jit = /^0x([0-9a-f]+)(?:'\d+)?$/.exec(raw);
    if (jit === null) return COMPILER.test(raw) ? '(V8 compilers)' : raw.replace(/'\d+$/, '').replace(/\(.*$/, '');
    const js = lookUp(perf, parseInt(jit[1], 16));
    return js === null ? '(JIT code not in the perf map)' : shortName(js);
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('fn=')) {
      const m = /^fn=\((\d+)\)(?: (.*))?$/.exec(line);
      if (m === null) fn = nameOf(line.slice(3));
      else {
        if (m[2] !== undefined) names.set(m[1], nameOf(m[2]));
        fn = names.get(m[1]) ?? `fn ${m[1]}`;
      }
      continue;
    }
    if (line.startsWith('cfn=')) {
      // A call's target: may be where a compressed name is first defined.
      const m = /^cfn=\((\d+)\) (.*)$/.exec(line);
      if (m !== null) names.set(m[1], nameOf(m[2]));
      continue;
    }
    if (line.startsWith('calls=')) {
      afterCalls = true;
      continue;
    }
    const c = line.charCodeAt(0);
    const isCost = (c >= 48 && c <= 57) || c === 43 || c === 45 || c === 42; // digit + - *
    if (!isCost) continue;
    if (afterCalls) {
      // The line after `calls=` is the inclusive cost of that call, not this function's own.
      afterCalls = false;
      continue;
    }
    const parts = line.split(' ');
    const ir = Number(parts[1]);
    if (Number.isFinite(ir)) out.set(fn, (out.get(fn) ?? 0) + ir);
  }
  return out;
}

/** Per-step difference of two modes' differentials: ((b.long − b.short) − (a.long − a.short)) / steps. */
export function perStepDifference(a, b, steps) {
  const keys = new Set([...a.short.keys(), ...a.long.keys(), ...b.short.keys(), ...b.long.keys()]);
  const diff = new Map();
  for (const k of keys) {
    const d = ((b.long.get(k) ?? 0) - (b.short.get(k) ?? 0) - ((a.long.get(k) ?? 0) - (a.short.get(k) ?? 0))) / steps;
    if (d !== 0) diff.set(k, d);
  }
  return diff;
}

#!/usr/bin/env node
// The import rules of docs/ARCHITECTURE.md, checked over the import graph of src/**/*.ts:
//   cycle    no import circle between files (type-only imports count: a circle of types is
//            still a circle a reader has to hold in their head);
//   layer    a folder imports only folders on a lower layer, or itself; the entry points
//            (src/index.ts, src/node.ts) sit on top and nothing imports them;
//   render   render/ imports only core/ (renderers take plain data, never a model);
//   length   no file over MAX_LINES lines, except the faithful PyTorch ports listed in
//            LONG_FILE_EXCEPTIONS, whose every function stays short;
//   resolve  every relative import names a file that exists.
// The graph comes from the TypeScript parser (already a devDependency), so comments and
// strings never look like imports: `import … from`, `export … from`, `import x = require()`,
// `import('…')` calls and `import('…')` types all count; bare specifiers (npm packages, node:
// builtins) are outside the graph.
//
// `node scripts/check-architecture.mjs [srcDir] [--graph]` prints every violation (and with
// --graph the import graph between folders) and exits 1 when there is a violation;
// test/architecture/ runs the same check under `npm test`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/** The layers, lowest first. A folder imports only folders on a strictly lower layer, or its own. */
export const LAYERS = [['core'], ['render'], ['torch', 'capture'], ['allocator', 'tracking', 'analysis'], ['tfjs', 'viewer', 'webgpu'], ['cli', 'browser']];

/** Files directly in src/ that are package entry points: above every layer, imported by nothing. */
export const ENTRY_POINTS = ['index.ts', 'node.ts'];

/** The longest a source file may be. */
export const MAX_LINES = 600;

/**
 * Files allowed past MAX_LINES: faithful ports of one PyTorch source file each, kept in one file
 * so they read side by side with PyTorch's, and made of short functions (none longer than
 * MAX_PORT_FUNCTION_LINES, which the check enforces).
 */
export const LONG_FILE_EXCEPTIONS = {
  // c10/cuda/CUDACachingAllocator.cpp's DeviceCachingAllocator: its block/segment/pool rules
  // in PyTorch's order, one method per PyTorch method.
  'allocator/caching-allocator.ts': 'port of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator)',
  // torch/profiler/_memory_profiler.py: OpTree → SizeMap → DataFlowGraph → categories → timeline.
  'analysis/memory-profile.ts': 'port of torch/profiler/_memory_profiler.py (MemoryProfile)',
};

/** The longest function an exempt port may hold. */
export const MAX_PORT_FUNCTION_LINES = 60;

export const DEFAULT_RULES = {
  layers: LAYERS,
  entryPoints: ENTRY_POINTS,
  maxLines: MAX_LINES,
  longFileExceptions: LONG_FILE_EXCEPTIONS,
  maxPortFunctionLines: MAX_PORT_FUNCTION_LINES,
};

const SOURCE = /\.(ts|mts|cts)$/;

/** Every TypeScript source under `dir`, as paths relative to it with '/' separators, sorted. */
function listSources(dir) {
  const out = [];
  const walk = (abs) => {
    for (const name of readdirSync(abs).sort()) {
      const path = join(abs, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (SOURCE.test(name)) out.push(relative(dir, path).split(sep).join('/'));
    }
  };
  walk(dir);
  return out;
}

/** The module specifiers a file imports: `{ specifier, typeOnly, line }` each. */
export function importsOf(fileName, text) {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const add = (literal, typeOnly) => {
    if (!literal || !(ts.isStringLiteral(literal) || ts.isNoSubstitutionTemplateLiteral(literal))) return;
    found.push({ specifier: literal.text, typeOnly, line: sf.getLineAndCharacterOfPosition(literal.getStart(sf)).line + 1 });
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      const typeOnly = !!clause && (clause.isTypeOnly || (!clause.name && !!clause.namedBindings && ts.isNamedImports(clause.namedBindings) && clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      add(node.moduleSpecifier, typeOnly);
    } else if (ts.isExportDeclaration(node)) {
      const clause = node.exportClause;
      add(node.moduleSpecifier, node.isTypeOnly || (!!clause && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly)));
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node.moduleReference.expression, node.isTypeOnly);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      add(node.arguments[0], false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** The longest function-like body in a file: `{ name, line, lines }`, or null when there is none. */
export function longestFunction(fileName, text) {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  let longest = null;
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (!longest || lines > longest.lines) longest = { name: node.name ? node.name.getText(sf) : '(anonymous)', line: first + 1, lines };
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return longest;
}

/** Lines as `wc -l` counts them for a file that ends with a newline. */
function lineCount(text) {
  if (text === '') return 0;
  const n = text.split('\n').length;
  return text.endsWith('\n') ? n - 1 : n;
}

/** The file a relative specifier names, relative to src, or null when there is none. */
function resolveSpecifier(srcDir, fromRel, specifier, known) {
  const base = relative(srcDir, resolve(srcDir, dirname(fromRel), specifier)).split(sep).join('/');
  const candidates = [base];
  const swapped = base.replace(/\.js$/, '.ts').replace(/\.mjs$/, '.mts').replace(/\.cjs$/, '.cts');
  if (swapped !== base) candidates.push(swapped);
  candidates.push(`${base}.ts`, `${base}/index.ts`);
  for (const c of candidates) {
    if (known.has(c)) return c;
    if (!SOURCE.test(c) && !c.startsWith('..') && existsSync(join(srcDir, c)) && statSync(join(srcDir, c)).isFile()) return c;
  }
  return null;
}

/** The folder (first path segment) a src-relative path belongs to; '' for files directly in src. */
function folderOf(rel) {
  const i = rel.indexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

/**
 * Every simple cycle needed to cover each strongly connected group of files: for each file of a
 * group not yet on a reported cycle, the shortest cycle through it.
 */
function findCycles(nodes, adjacency) {
  // Tarjan's strongly connected components, iterative.
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const groups = [];
  let next = 0;
  for (const root of nodes) {
    if (index.has(root)) continue;
    const work = [{ node: root, edges: adjacency.get(root) ?? [], i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      if (frame.i < frame.edges.length) {
        const to = frame.edges[frame.i++];
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edges: adjacency.get(to) ?? [], i: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node), index.get(to)));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent), low.get(frame.node)));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const group = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          group.push(member);
        } while (member !== frame.node);
        const selfLoop = group.length === 1 && (adjacency.get(group[0]) ?? []).includes(group[0]);
        if (group.length > 1 || selfLoop) groups.push(group.sort());
      }
    }
  }

  const cycles = [];
  for (const group of groups.sort((a, b) => a[0].localeCompare(b[0]))) {
    const inGroup = new Set(group);
    const covered = new Set();
    for (const start of group) {
      if (covered.has(start)) continue;
      // Breadth-first from start's successors back to start, inside the group.
      const previous = new Map();
      const queue = [];
      for (const to of adjacency.get(start) ?? []) {
        if (inGroup.has(to) && !previous.has(to)) {
          previous.set(to, start);
          queue.push(to);
        }
      }
      let found = previous.has(start);
      for (let q = 0; q < queue.length && !found; q++) {
        for (const to of adjacency.get(queue[q]) ?? []) {
          if (!inGroup.has(to) || previous.has(to)) continue;
          previous.set(to, queue[q]);
          if (to === start) {
            found = true;
            break;
          }
          queue.push(to);
        }
      }
      const path = [start];
      for (let at = previous.get(start); at !== start; at = previous.get(at)) path.unshift(at);
      path.unshift(start);
      for (const file of path) covered.add(file);
      cycles.push({ path, group });
    }
  }
  return cycles;
}

/**
 * Checks the tree under `srcDir` against `rules` (DEFAULT_RULES unless given). Returns the files,
 * the import edges (`{ from, to, typeOnly, line }`, src-relative) and the violations
 * (`{ rule, files, message }`), in a stable order.
 */
export function checkArchitecture(srcDir, rules = DEFAULT_RULES) {
  const { layers, entryPoints, maxLines, longFileExceptions, maxPortFunctionLines } = rules;
  const rank = new Map();
  layers.forEach((folders, i) => folders.forEach((f) => rank.set(f, i)));
  const below = (i) => layers.slice(0, i).flat();

  const files = listSources(srcDir);
  const known = new Set(files);
  const texts = new Map(files.map((f) => [f, readFileSync(join(srcDir, f), 'utf8')]));
  const violations = [];
  const edges = [];

  // Folders and root files outside the layer table.
  const unknownFolders = new Set();
  for (const f of files) {
    const folder = folderOf(f);
    if (folder === '' && !entryPoints.includes(f)) {
      violations.push({ rule: 'layer', files: [f], message: `src/${f} sits directly in src/ but is not an entry point (${entryPoints.join(', ')}): move it into a layer folder` });
    } else if (folder !== '' && !rank.has(folder) && !unknownFolders.has(folder)) {
      unknownFolders.add(folder);
      violations.push({ rule: 'layer', files: [`${folder}/`], message: `src/${folder}/ is in no layer of the table (${layers.map((l) => l.join(', ')).join(' → ')}): add it to docs/ARCHITECTURE.md and scripts/check-architecture.mjs, or move its files into a layer` });
    }
  }

  for (const from of files) {
    for (const imp of importsOf(from, texts.get(from))) {
      if (!imp.specifier.startsWith('.')) continue;
      const to = resolveSpecifier(srcDir, from, imp.specifier, known);
      if (to === null) {
        violations.push({ rule: 'resolve', files: [from], message: `src/${from}:${imp.line} imports '${imp.specifier}', which names no file in src/` });
        continue;
      }
      edges.push({ from, to, typeOnly: imp.typeOnly, line: imp.line });
    }
  }

  // Layers: each importing file and imported folder once, at its first import.
  const seenLayerPairs = new Set();
  for (const { from, to, typeOnly, line } of edges) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (a === b && a !== '') continue;
    const key = `${from}→${b === '' ? to : b}`;
    if (seenLayerPairs.has(key)) continue;
    const what = `src/${from}:${line} imports src/${to}${typeOnly ? ' (type only)' : ''}`;
    let message = null;
    if (b === '') {
      message = `${what}: the entry points are on top, nothing in src/ imports them`;
    } else if (a === '') {
      continue; // an entry point imports anything
    } else if (unknownFolders.has(a) || unknownFolders.has(b)) {
      continue; // reported once as a folder outside the table
    } else if (rank.get(b) < rank.get(a)) {
      continue; // downward: allowed
    } else if (a === 'render') {
      message = `${what}: render/ imports only core/ (renderers take plain data, not a model)`;
    } else if (rank.get(b) === rank.get(a)) {
      message = `${what}: ${a}/ and ${b}/ are on the same layer, and folders on one layer do not import each other`;
    } else if (rank.get(b) > rank.get(a)) {
      const allowed = below(rank.get(a));
      message = `${what}: an upward import — ${allowed.length > 0 ? `${a}/ imports only ${allowed.map((f) => `${f}/`).join(', ')}` : `${a}/ is the lowest layer and imports no other folder`}`;
    }
    if (message) {
      seenLayerPairs.add(key);
      violations.push({ rule: a === 'render' ? 'render' : 'layer', files: [from, to], message });
    }
  }

  // Circles between files.
  const adjacency = new Map(files.map((f) => [f, []]));
  const edgeKind = new Map();
  for (const { from, to, typeOnly } of edges) {
    if (!adjacency.get(from).includes(to)) adjacency.get(from).push(to);
    const key = `${from}→${to}`;
    edgeKind.set(key, edgeKind.has(key) ? edgeKind.get(key) && typeOnly : typeOnly);
  }
  for (const { path, group } of findCycles(files, adjacency)) {
    const steps = path.map((f, i) => (i === 0 ? `src/${f}` : `${edgeKind.get(`${path[i - 1]}→${f}`) ? '-(type)->' : '->'} src/${f}`)).join(' ');
    const more = group.length > path.length - 1 ? ` (one of the circles among ${group.length} files: ${group.map((f) => `src/${f}`).join(', ')})` : '';
    violations.push({ rule: 'cycle', files: path.slice(0, -1), message: `import circle: ${steps}${more}` });
  }

  // Circles between folders through a folder outside the layer table (which the layer order
  // cannot judge); between folders in the table, the layer order already forbids every circle.
  if (unknownFolders.size > 0) {
    const folders = [...new Set(files.map(folderOf).filter((f) => f !== ''))].sort();
    const folderAdjacency = new Map(folders.map((f) => [f, []]));
    const example = new Map();
    for (const { from, to } of edges) {
      const a = folderOf(from);
      const b = folderOf(to);
      if (a === '' || b === '' || a === b) continue;
      if (!folderAdjacency.get(a).includes(b)) folderAdjacency.get(a).push(b);
      if (!example.has(`${a}→${b}`)) example.set(`${a}→${b}`, `src/${from} imports src/${to}`);
    }
    for (const { path } of findCycles(folders, folderAdjacency)) {
      if (!path.some((f) => unknownFolders.has(f))) continue;
      const because = path.slice(1).map((f, i) => example.get(`${path[i]}→${f}`)).join('; ');
      violations.push({ rule: 'cycle', files: path.slice(0, -1).map((f) => `${f}/`), message: `folder circle: ${path.map((f) => `${f}/`).join(' -> ')} (${because})` });
    }
  }

  // Length.
  for (const f of files) {
    const lines = lineCount(texts.get(f));
    const reason = longFileExceptions[f];
    if (lines > maxLines && reason === undefined) {
      violations.push({ rule: 'length', files: [f], message: `src/${f} has ${lines} lines (limit ${maxLines}): split it by concern` });
    } else if (reason !== undefined) {
      if (lines <= maxLines) {
        violations.push({ rule: 'length', files: [f], message: `src/${f} is exempt from the ${maxLines}-line limit (${reason}) but has ${lines} lines: drop it from LONG_FILE_EXCEPTIONS` });
        continue;
      }
      const longest = longestFunction(f, texts.get(f));
      if (longest && longest.lines > maxPortFunctionLines) {
        violations.push({ rule: 'length', files: [f], message: `src/${f} is exempt from the ${maxLines}-line limit as a ${reason}, but its function ${longest.name} (line ${longest.line}) spans ${longest.lines} lines (an exempt port keeps every function within ${maxPortFunctionLines})` });
      }
    }
  }
  for (const f of Object.keys(longFileExceptions)) {
    if (!known.has(f)) violations.push({ rule: 'length', files: [f], message: `LONG_FILE_EXCEPTIONS names src/${f}, which does not exist: drop it` });
  }

  const order = ['resolve', 'layer', 'render', 'cycle', 'length'];
  violations.sort((x, y) => order.indexOf(x.rule) - order.indexOf(y.rule) || x.message.localeCompare(y.message, 'en', { numeric: true }));
  return { files, edges, violations };
}

/**
 * The import graph between folders (an entry point counts as its own node, by file name): one
 * `{ from, to, imports }` per pair of folders that one imports the other, lowest importer first.
 */
export function folderGraph(edges, rules = DEFAULT_RULES) {
  const node = (file) => folderOf(file) || file;
  const counts = new Map();
  for (const { from, to } of edges) {
    const a = node(from);
    const b = node(to);
    if (a === b) continue;
    counts.set(`${a}\0${b}`, (counts.get(`${a}\0${b}`) ?? 0) + 1);
  }
  const rank = new Map();
  rules.layers.forEach((folders, i) => folders.forEach((f) => rank.set(f, i)));
  const order = (f) => rank.get(f) ?? rules.layers.length;
  return [...counts]
    .map(([key, imports]) => {
      const [from, to] = key.split('\0');
      return { from, to, imports };
    })
    .sort((x, y) => order(x.from) - order(y.from) || x.from.localeCompare(y.from) || order(y.to) - order(x.to) || x.to.localeCompare(y.to));
}

/** The violations as one numbered list, grouped by rule. */
export function formatViolations(violations) {
  if (violations.length === 0) return 'no violations';
  const titles = { resolve: 'imports that name no file', layer: 'imports against the layer order', render: 'render/ importing more than core/', cycle: 'import circles', length: 'files over the line limit' };
  const out = [`${violations.length} architecture violation(s):`];
  let rule = null;
  violations.forEach((v, i) => {
    if (v.rule !== rule) {
      rule = v.rule;
      out.push(`${titles[rule] ?? rule}:`);
    }
    out.push(`  ${i + 1}. ${v.message}`);
  });
  return out.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const showGraph = args.includes('--graph');
  const dir = args.find((a) => a !== '--graph');
  const srcDir = resolve(dir ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'src'));
  const { files, edges, violations } = checkArchitecture(srcDir);
  process.stdout.write(`${files.length} files, ${edges.length} imports under ${relative(process.cwd(), srcDir) || '.'}\n${formatViolations(violations)}\n`);
  if (showGraph) {
    process.stdout.write('folder imports (importer -> imported: import statements):\n');
    for (const { from, to, imports } of folderGraph(edges)) process.stdout.write(`  ${from} -> ${to}: ${imports}\n`);
  }
  process.exitCode = violations.length > 0 ? 1 : 0;
}

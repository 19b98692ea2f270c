/**
 * The documentation map of docs/ARCHITECTURE.md ("Documentation") kept true: every page in docs/
 * is listed there as a user or a developer page, package.json ships exactly the user pages, a
 * user page links only to what the package ships, and every relative link in README.md and docs/
 * names a file (and a heading) that exists.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixture, repoRoot } from '../support/fixtures.js';

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function headingSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The lines of a Markdown text outside fenced code blocks, with their line numbers. */
function proseLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | null = null;
  text.split('\n').forEach((line, i) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker) {
      if (fence === null) fence = marker[0]!;
      else if (marker[0] === fence) fence = null;
      return;
    }
    if (fence === null) out.push({ line: i + 1, text: line });
  });
  return out;
}

/** The anchors a Markdown text's headings get, duplicates numbered as GitHub does. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text: line } of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = headingSlug(heading);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The relative links of a Markdown text: `[text](target)` outside code, not URLs. */
function relativeLinks(text: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  for (const { line, text: prose } of proseLines(text)) {
    const withoutCode = prose.replace(/`[^`]*`/g, '');
    for (const m of withoutCode.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ line, target });
    }
  }
  return links;
}

/** Problems with the links of the Markdown file at `file` (absolute), as readable lines. */
function brokenLinks(file: string, root: string): string[] {
  const problems: string[] = [];
  const text = readFileSync(file, 'utf8');
  for (const { line, target } of relativeLinks(text)) {
    const [path, anchor] = target.split('#', 2) as [string, string | undefined];
    const destination = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
    const where = `${relative(root, file)}:${line} links to ${target}`;
    if (!existsSync(destination)) {
      problems.push(`${where}, which does not exist`);
      continue;
    }
    if (anchor !== undefined && statSync(destination).isFile() && destination.endsWith('.md') && !anchorsOf(readFileSync(destination, 'utf8')).has(anchor)) {
      problems.push(`${where}: ${relative(root, destination)} has no heading with that anchor`);
    }
  }
  return problems;
}

const docsDir = join(repoRoot, 'docs');
const pages = readdirSync(docsDir).filter((f) => f.endsWith('.md')).sort();

/** The rows of ARCHITECTURE.md's documentation table: page → audience. */
function documentationTable(): Map<string, string> {
  const text = readFileSync(join(docsDir, 'ARCHITECTURE.md'), 'utf8');
  const table = new Map<string, string>();
  for (const m of text.matchAll(/^\| \[[^\]]+\]\(([^)]+)\) \| (users|developers) \|/gm)) {
    expect(table.has(m[1]!), `${m[1]} is listed twice`).toBe(false);
    table.set(m[1]!, m[2]!);
  }
  return table;
}

describe('the link checker', () => {
  it('gives headings the anchors GitHub gives them', () => {
    expect(headingSlug('Replay (`memscope replay SNAPSHOT`)')).toBe('replay-memscope-replay-snapshot');
    expect(headingSlug('`--max-entries N`')).toBe('--max-entries-n');
    expect(headingSlug('1. Kineto chrome trace')).toBe('1-kineto-chrome-trace');
    expect([...anchorsOf('# A\n## Cost\n```\n# not a heading\n```\n### Cost\n')]).toEqual(['a', 'cost', 'cost-1']);
  });

  it('finds relative links outside code and URLs, and reports a missing file or heading', () => {
    expect(relativeLinks('[a](A.md) [b](https://x.org/y) `[c](C.md)` [d](D.md#part "title")\n```\n[e](E.md)\n```\n[f](#top)')).toEqual([
      { line: 1, target: 'A.md' },
      { line: 1, target: 'D.md#part' },
      { line: 5, target: '#top' },
    ]);
    expect(brokenLinks(fixture('architecture/links.md'), repoRoot)).toEqual([
      'test/fixtures/architecture/links.md:3 links to ../../../docs/NOT_THERE.md, which does not exist',
      'test/fixtures/architecture/links.md:4 links to ../../../docs/COMMANDS.md#no-such-heading: docs/COMMANDS.md has no heading with that anchor',
      'test/fixtures/architecture/links.md:5 links to #nowhere: test/fixtures/architecture/links.md has no heading with that anchor',
    ]);
  });
});

describe('the documentation', () => {
  it('lists every page of docs/ in ARCHITECTURE.md as a user or a developer page', () => {
    const table = documentationTable();
    expect([...table.keys()].sort()).toEqual(pages);
    expect(table.get('ARCHITECTURE.md')).toBe('developers');
  });

  it('ships exactly the user pages in the npm package', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { files: string[] };
    const table = documentationTable();
    const userPages = [...table].filter(([, audience]) => audience === 'users').map(([page]) => `docs/${page}`).sort();
    // Each page by name: a folder or a pattern would ship the developer pages too.
    const shippedDocs = pkg.files.filter((entry) => entry === 'docs' || entry.startsWith('docs/') || entry.includes('*')).sort();
    expect(shippedDocs).toEqual(userPages);
  });

  it('links a user page only to what the package ships', () => {
    const table = documentationTable();
    const problems: string[] = [];
    for (const [page, audience] of table) {
      if (audience !== 'users') continue;
      for (const { line, target } of relativeLinks(readFileSync(join(docsDir, page), 'utf8'))) {
        const path = target.split('#')[0]!;
        if (path === '') continue;
        const to = relative(docsDir, resolve(docsDir, path));
        if (table.get(to) !== 'users' && to !== '../README.md') problems.push(`docs/${page}:${line} links to ${target}, which the package does not ship`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('has no broken relative link in README.md or docs/', () => {
    const problems = [join(repoRoot, 'README.md'), ...pages.map((p) => join(docsDir, p))].flatMap((f) => brokenLinks(f, repoRoot));
    expect(problems, problems.join('\n')).toEqual([]);
  });
});

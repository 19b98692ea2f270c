import { describe, expect, it } from 'vitest';
import { renderHtmlPage } from '../../src/render/html-page.js';
import { renderStackedAreaSvg } from '../../src/render/stacked-area-svg.js';

const POLICY = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/;

describe('renderHtmlPage', () => {
  it('writes one self-contained document whose policy forbids every fetch and every script', () => {
    const html = renderHtmlPage({ title: 'a </title><script>x</script>', css: '\nbody { color: red; }\n', body: '<p>hi</p>\n' });
    expect(html.startsWith('<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n')).toBe(true);
    expect(html).toContain('<title>a &lt;/title&gt;&lt;script&gt;x&lt;/script&gt;</title>');
    expect(html).toContain('<style>\nbody { color: red; }\n</style>');
    expect(html).toContain('<body>\n<p>hi</p>\n</body>\n</html>\n');
    expect(html).not.toMatch(/<script/);
    const policy = POLICY.exec(html)![1]!;
    expect(policy.split('; ')).toEqual(["default-src 'none'", "style-src 'unsafe-inline'", 'img-src data:']);
  });

  it('allows inline script only for a page that has one, and the script cannot end its element early', () => {
    const html = renderHtmlPage({ title: 't', css: '', body: '<main></main>', script: 'const s = "</script><b>";' });
    expect(POLICY.exec(html)![1]!.split('; ')).toContain("script-src 'unsafe-inline'");
    expect(html).toContain('<main></main>\n<script>const s = "<\\/script><b>";</script>\n</body>');
    expect(html.match(/<script/g)).toHaveLength(1);
  });
});

describe('renderStackedAreaSvg', () => {
  it('stacks the bands bottom-up, labels the byte axis in the unit of the peak and escapes every label', () => {
    const MiB = 1024 * 1024;
    const svg = renderStackedAreaSvg(
      { times: [0, 1000, 2000], values: [[MiB, 0], [2 * MiB, MiB], [MiB, 3 * MiB]], bands: [{ label: 'a<b>', color: 'red' }, { label: 'c&d', color: 'blue' }] },
      ['peak "4 MiB"'],
      600,
      400,
    );
    const polygons = [...svg.matchAll(/<polygon points="([^"]*)" fill="(\w+)"/g)];
    expect(polygons.map((p) => p[2])).toEqual(['red', 'blue']);
    // The second band's top edge reaches the 4 MiB peak at the last sample, the first band's top stays at 1 MiB there.
    const topOf = (points: string) => points.split(' ').slice(0, 3).map((p) => Number(p.split(',')[1]));
    const [red, blue] = polygons.map((p) => topOf(p[1]!));
    expect(blue![2]!).toBeLessThan(red![2]!);
    // An empty band sits on the one below it: at the first sample the second band's top is the first's.
    expect(blue![0]).toBe(red![0]);
    expect(svg).toContain('Memory (MiB)');
    expect(svg).toContain('<title>a&lt;b&gt;</title>');
    expect(svg).toContain('>c&amp;d</text>');
    expect(svg).toContain('>peak &quot;4 MiB&quot;</text>');
    expect(svg).toContain('Time (ms)');
  });
});

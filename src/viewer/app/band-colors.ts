/**
 * The colours of the Active Memory Timeline's bands: a palette by site (or by category), lighter
 * for a site's summed band, hatched grey for "smaller allocations", and the pixel words
 * (ImageData's little-endian RGBA) the renderer writes.
 */
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#fabfd2', '#8cd17d', '#b6992d', '#499894', '#79706e', '#d4a6c8', '#a0cbe8', '#ffbe7d', '#f1ce63'];
/** The "smaller allocations" band: light grey hatched with a darker grey. */
export const SMALLER_COLOR = '#d9d9d9';
export const SMALLER_RGB = 0xd9d9d9;
export const SMALLER_HATCH_RGB = 0xa6a6a6;
/** Summed bands of the sites beyond the first MAX_GROUPS - 1. */
export const OTHER_SITES_COLOR = '#bab0ac';
export const RESERVED_RGB = 0x333333;
export const PINNED_RGB = 0x111111;
export const MATCH_MARK_RGB = 0xd62728;
/** How far toward white a site's summed band is drawn, so it reads apart from single allocations. */
const SUMMED_TINT = 0.4;

/** 0xRRGGBB → the little-endian RGBA word ImageData's Uint32 view takes. */
export function rgba(rgb: number, alpha = 255): number {
  return ((alpha << 24) | ((rgb & 0xff) << 16) | (rgb & 0xff00) | ((rgb >> 16) & 0xff)) >>> 0;
}

export function darker(rgb: number, f: number): number {
  const ch = (v: number): number => Math.round(v * (1 - f));
  return (ch((rgb >> 16) & 255) << 16) | (ch((rgb >> 8) & 255) << 8) | ch(rgb & 255);
}

export function towardWhite(rgb: number, f: number): number {
  const ch = (v: number): number => Math.round(v + (255 - v) * f);
  return (ch((rgb >> 16) & 255) << 16) | (ch((rgb >> 8) & 255) << 8) | ch(rgb & 255);
}

/** Allocations without frames (string 0) are slate. */
export const NO_SITE_COLOR = '#8e9aaf';

/**
 * The colour of the site ranked `rank` (0: the most bytes) on its device. The palette goes to the
 * largest sites first, so the twenty sites a user looks at and compares never share a colour; a
 * colour by string index would give two of the legend's eight sites one colour most of the time.
 */
export function rankedColor(rank: number): string {
  return PALETTE[rank % PALETTE.length]!;
}

/** The colour of a site's summed band (lighter than its single allocations); null: the sites beyond the grouped ones. */
export function summedColor(siteColor: string | null): string {
  if (siteColor === null) return OTHER_SITES_COLOR;
  return `#${towardWhite(parseInt(siteColor.slice(1), 16), SUMMED_TINT).toString(16).padStart(6, '0')}`;
}

/** Per entry: a band's colour ("#rrggbb" in `hex`), its colour faded (not a search match), and its top edge (darker, so neighbouring bands of one site stay apart). */
export interface BandPalette {
  readonly hex: readonly string[];
  readonly color: Uint32Array;
  readonly faded: Uint32Array;
  readonly edge: Uint32Array;
}

/**
 * The palette of bands coloured by `keys` (one per allocation; small non-negative integers such as
 * string or category indexes), `colorOf` giving a key's "#rrggbb": fills `entries` with each
 * allocation's entry. Allocations share a handful of colours, so an entry per allocation is two bytes.
 */
export function bandPalette(keys: ArrayLike<number>, entries: Uint16Array, colorOf: (key: number) => string): BandPalette {
  const entryOfKey: number[] = [];
  const entryOfColor = new Map<string, number>();
  const hexes: string[] = [];
  const color: number[] = [];
  const faded: number[] = [];
  const edge: number[] = [];
  for (let a = 0; a < entries.length; a++) {
    const key = keys[a]!;
    let entry = entryOfKey[key];
    if (entry === undefined) {
      const hex = colorOf(key);
      let shared = entryOfColor.get(hex);
      if (shared === undefined) {
        // More distinct colours than an entry can number share the last one.
        shared = Math.min(color.length, 0xffff);
        if (shared === color.length) {
          const rgb = parseInt(hex.slice(1), 16);
          hexes.push(hex);
          color.push(rgba(rgb));
          faded.push(rgba(towardWhite(rgb, 0.82)));
          edge.push(rgba(darker(rgb, 0.3)));
        }
        entryOfColor.set(hex, shared);
      }
      entry = entryOfKey[key] = shared;
    }
    entries[a] = entry;
  }
  return { hex: hexes, color: Uint32Array.from(color), faded: Uint32Array.from(faded), edge: Uint32Array.from(edge) };
}

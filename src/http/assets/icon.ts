// The project's icon and colours, for every page this process serves: the console, the
// inspector, the API docs and the browsers' `/favicon.ico`.

/** The header's navy, the pages' accent and the text on them. */
export const BRAND = { navy: '#16213a', accent: '#2456d3', light: '#cfdaf5' } as const;

/** A white "A" on a rounded navy square. */
export const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">' +
  `<rect width="32" height="32" rx="6" fill="${BRAND.navy}"/>` +
  '<text x="16" y="23" font-size="20" font-family="sans-serif" font-weight="700" ' +
  'text-anchor="middle" fill="#fff">A</text></svg>';

/** The icon beside the word, for the API docs' top bar. */
export const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 132 32" width="132" height="32">' +
  `<rect width="32" height="32" rx="6" fill="#fff"/>` +
  `<text x="16" y="23" font-size="20" font-family="sans-serif" font-weight="700" text-anchor="middle" fill="${BRAND.navy}">A</text>` +
  '<text x="42" y="23" font-size="20" font-family="sans-serif" font-weight="700" fill="#fff">Agentry</text></svg>';

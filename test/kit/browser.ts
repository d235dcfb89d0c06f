import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { newestMtime, repositoryRoot } from './process.js';

/** Debian's chromium package; CI installs it. */
export const chromiumPath = process.env.AGENTRY_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Why browser tests cannot run here, or undefined when they can. */
export const browserSkipReason = existsSync(chromiumPath)
  ? undefined
  : `no Chromium at ${chromiumPath} (apt-get install chromium, or set AGENTRY_TEST_CHROMIUM)`;

/** Builds the web pages (dist/web) when they are missing or older than their sources. */
export function ensureWebBuild(): void {
  const built = join(repositoryRoot, 'dist/web/index.html');
  if (existsSync(built) && statSync(built).mtimeMs >= newestMtime(join(repositoryRoot, 'web'))) {
    return;
  }
  const result = spawnSync(
    process.execPath,
    [
      join(repositoryRoot, 'node_modules/vite/bin/vite.js'),
      'build',
      '--config',
      'web/vite.config.ts',
    ],
    { cwd: repositoryRoot, encoding: 'utf8' },
  );
  if (result.status !== 0) throw new Error(`web build failed:\n${result.stdout}${result.stderr}`);
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Problems a page reports: script errors, CSP refusals, console errors, dialogs opened. */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) {
      problems.push(`console: ${msg.text()}`);
    }
  });
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return problems;
}

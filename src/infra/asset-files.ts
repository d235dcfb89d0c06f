import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError } from '../config/index.js';

/** A file name an asset's contents may have: its id, a dot and a random suffix. */
const FILE_NAME = /^[0-9a-f-]{36}\.[0-9a-z]{16}$/;

/**
 * Asset contents kept as files in one directory (`AGENTRY_ASSETS_DIR`), for deployments whose
 * assets would make the database large. Each upload is a new file (the asset's id and a random
 * suffix, under a subdirectory named by the id's first two characters), written whole under a
 * temporary name and then renamed: a reader sees the old contents or the new, never a part,
 * and the metadata row names the file only once the upload is committed.
 */
export class AssetFiles {
  readonly dir: string;

  /** Creates the directory if need be; throws with a sentence when it cannot be written. */
  constructor(dir: string) {
    this.dir = resolve(dir);
    try {
      mkdirSync(this.dir, { recursive: true });
      accessSync(this.dir, constants.W_OK | constants.R_OK);
    } catch (err) {
      throw new ConfigError(
        `AGENTRY_ASSETS_DIR (${this.dir}) must be a directory this process can read and write: ${(err as Error).message}`,
      );
    }
  }

  /** Writes new contents of the asset; the name of the file that holds them. */
  async write(assetId: string, contents: Uint8Array): Promise<string> {
    const file = `${assetId}.${randomBytes(10).toString('hex').slice(0, 16)}`;
    const path = this.pathOf(file);
    await mkdir(join(path, '..'), { recursive: true });
    const temporary = `${path}.tmp`;
    await writeFile(temporary, contents, { flag: 'wx' });
    await rename(temporary, path);
    return file;
  }

  /** The contents of a file written by {@link write}; undefined when it is gone. */
  async read(file: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.pathOf(file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** Removes a file written by {@link write}; one already gone is no error. */
  async remove(file: string): Promise<void> {
    await rm(this.pathOf(file), { force: true });
  }

  private pathOf(file: string): string {
    if (!FILE_NAME.test(file)) throw new Error(`not an asset file name: ${file}`);
    return join(this.dir, file.slice(0, 2), file);
  }
}

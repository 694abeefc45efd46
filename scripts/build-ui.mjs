#!/usr/bin/env node
// Builds the admin web UI (issue 28) into dist/ui: its TypeScript by tsc (ui/tsconfig.json, browser modules, no
// bundler: the files are few and served as they are), then its HTML and CSS copied beside. Part of `npm run build`
// and of `npm start`'s build, so the package ships the UI and nothing is fetched at run time.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/ui');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'ui/tsconfig.json')], { cwd: root, stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);
mkdirSync(out, { recursive: true });
for (const file of ['index.html', 'app.css']) copyFileSync(join(root, 'ui', file), join(out, file));

// Builds, from the npm packages this folder's package-lock.json pins:
//   maya_tools/static/card-view.js            the card view's script (view.js), inlined by maya_tools/channels/app_card.py
//   maya_tools/static/card-view.licenses.txt  the licences of every package bundled into it
//   tests/browser/app-bridge.bundle.js        the browser tests' host bridge (host-bridge.js)
// Usage: npm ci && node build.mjs [--out DIR] [--analyze]
//   --out DIR   write under DIR instead of the repository (tests compare that with the committed files)
//   --analyze   print what each package adds to the view's script
// The output is deterministic: no timestamps, no absolute paths, packages in a fixed order.
import * as esbuild from "esbuild";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const outRoot = flag("--out") ? path.resolve(args[args.indexOf("--out") + 1]) : path.resolve(here, "../..");
const VIEW = "maya_tools/static/card-view.js";
const LICENSES = "maya_tools/static/card-view.licenses.txt";
const BRIDGE = "tests/browser/app-bridge.bundle.js";

// ext-apps imports zod as `import {z as Q} from "zod/v4"`, the namespace re-exported as a value, so
// esbuild keeps every zod export (its locales, JSON Schema conversion: about 220 KB of the view). As
// `import * as Q from "zod/v4"` (the same object: zod/v4 re-exports all of classic/external.js, which
// `z` is) esbuild keeps only the members it reads. Any other form of that import fails the build.
const ZOD_NAMED = /import\{z as ([\w$]+)\}from"zod\/v4";/g;
const zodNamespace = {
  name: "zod-namespace-import",
  setup(build) {
    build.onLoad({ filter: /[\\/]@modelcontextprotocol[\\/]ext-apps[\\/]dist[\\/]src[\\/][^\\/]+\.js$/ }, async (file) => {
      const source = await readFile(file.path, "utf8");
      const rewritten = source.replace(ZOD_NAMED, (_, name) => `import*as ${name} from"zod/v4";`);
      if (/\bz\s+as\b[^;]*from\s*"zod/.test(rewritten) || /import\s*\{\s*z\s*\}/.test(rewritten)) {
        throw new Error(`${path.basename(file.path)} imports zod's z in a form build.mjs does not rewrite`);
      }
      return { contents: rewritten, loader: "js" };
    });
  },
};

const COMMON = {
  bundle: true,
  platform: "browser",
  minify: true,
  charset: "utf8",
  legalComments: "eof",
  metafile: true,
  write: false,
  absWorkingDir: here,
  logLevel: "warning",
  plugins: [zodNamespace],
};

// The package an input file belongs to ("zod", "@modelcontextprotocol/core"), or null for ours.
function packageOf(input) {
  const parts = input.split("node_modules/");
  if (parts.length < 2) return null;
  const names = parts[parts.length - 1].split("/");
  return names[0].startsWith("@") ? `${names[0]}/${names[1]}` : names[0];
}

async function manifest(name) {
  return JSON.parse(await readFile(path.join(here, "node_modules", name, "package.json"), "utf8"));
}

// Bytes each bundled package adds to the output, largest first.
function weights(metafile) {
  const [output] = Object.values(metafile.outputs);
  const bytes = new Map();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    const name = packageOf(input) ?? "(maya-tools)";
    bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput);
  }
  return [...bytes].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}

async function bundled(metafile) {
  const names = weights(metafile).map(([name]) => name).filter((name) => name !== "(maya-tools)").sort();
  return Promise.all(names.map(async (name) => ({ name, ...(await manifest(name)) })));
}

async function write(relative, contents) {
  const target = path.join(outRoot, relative);
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, contents);
}

async function licenceText(pkg) {
  for (const file of ["LICENSE", "LICENSE.md", "LICENSE.txt", "license"]) {
    try {
      return (await readFile(path.join(here, "node_modules", pkg.name, file), "utf8")).trim();
    } catch (error) {
      if (error.code !== "ENOENT") throw error;
    }
  }
  throw new Error(`${pkg.name}@${pkg.version} ships no LICENSE file: add its licence text by hand`);
}

async function buildView() {
  const probe = await esbuild.build({ ...COMMON, entryPoints: ["view.js"], format: "esm", outfile: "card-view.js" });
  const packages = await bundled(probe.metafile);
  const names = packages.map((p) => `${p.name}@${p.version} (${p.license})`).join(", ");
  const banner = `/* maya-tools card view, bundled by web/card-view/build.mjs with ${names}; `
    + "their licences are in card-view.licenses.txt beside this file. */";
  const built = await esbuild.build({
    ...COMMON, entryPoints: ["view.js"], format: "esm", outfile: "card-view.js", banner: { js: banner },
  });
  const [js] = built.outputFiles;
  if (/<\/script|<!--|<script/i.test(js.text)) {
    throw new Error("the view's script contains </script, <script or <!-- and cannot be inlined in card-view.html");
  }
  await write(VIEW, js.contents);
  const texts = await Promise.all(packages.map(async (p) => `${p.name}@${p.version} (${p.license})\n\n${await licenceText(p)}\n`));
  await write(LICENSES, `The packages bundled into card-view.js, each with its licence.\n\n${texts.join("\n" + "=".repeat(72) + "\n\n")}`);
  return built.metafile;
}

async function buildBridge() {
  const ext = await manifest("@modelcontextprotocol/ext-apps");
  const built = await esbuild.build({
    ...COMMON, entryPoints: ["host-bridge.js"], format: "iife", globalName: "McpAppBridge", outfile: "app-bridge.bundle.js",
    banner: { js: `/* @modelcontextprotocol/ext-apps@${ext.version} app-bridge and its dependencies, bundled by web/card-view/build.mjs. Licences: MIT (see maya_tools/static/card-view.licenses.txt) and those in the trailing comments. */` },
  });
  await write(BRIDGE, built.outputFiles[0].contents);
}

const metafile = await buildView();
await buildBridge();
if (flag("--analyze")) {
  for (const [name, bytes] of weights(metafile)) console.log(`${String(bytes).padStart(8)}  ${name}`);
}

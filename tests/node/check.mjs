// Shared by the nats.js check scripts (streams, consumers, kv_os, kv_os_v3): assertions,
// small async helpers and the runner that connects, runs every registered check in order
// and reports. A script registers checks with `check(name, fn)` and ends with
// `run(connectFn)`; exit status 0 = all passed, 1 = a check failed, 2 = no server, 3 = a
// crash outside the checks.

export class CheckError extends Error {}

export function assert(cond, what) {
  if (!cond) throw new CheckError(what);
}

export function eq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new CheckError(`${what}: expected ${e}, got ${a}`);
}

// Runs fn, which must reject with a JetStream API error carrying err_code `code`.
export async function expectApiError(fn, code, what) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  if (err === null) throw new CheckError(`${what}: expected API error ${code}, but it succeeded`);
  const ae = err.api_error;
  if (!ae) {
    throw new CheckError(
      `${what}: expected API error ${code}, got non-API error ${err.code ?? ""} ${err.message}`,
    );
  }
  if (ae.err_code !== code) {
    throw new CheckError(
      `${what}: expected err_code ${code}, got ${ae.err_code} (${ae.code} ${ae.description})`,
    );
  }
  return err;
}

// Runs fn, which must reject (with anything); returns the error.
export async function rejects(fn, what) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new CheckError(`${what}: expected an error, but it succeeded`);
}

export async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

export async function waitFor(pred, what, ms = 5000) {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new CheckError(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// The server URL from the command line. No default: the scripts create and delete streams,
// so they must be pointed at a scratch server on purpose.
export function serverUrl(script, what) {
  const url = process.argv[2];
  if (!url) {
    console.log(`usage: node ${script} nats://HOST:PORT  (a scratch server: ${what} are created and deleted)`);
    process.exit(2);
  }
  return url;
}

const checks = [];

export function check(name, fn) {
  checks.push([name, fn]);
}

function describe(e) {
  if (e instanceof CheckError) return e.message;
  return `${e.name}: ${e.message}${e.api_error ? " " + JSON.stringify(e.api_error) : ""}`;
}

// Connects with `open()` (which returns {nc, ctx}), runs every check with ctx, prints one
// FAIL line per failed check and a summary, and exits. With `timeoutMs` a check that hangs
// (a subscription that never ends, a pull never answered) fails instead of stalling the run.
export async function run(open, { timeoutMs = 0, verbose = false } = {}) {
  const failures = [];
  let passed = 0;
  let conn;
  try {
    conn = await open();
  } catch (e) {
    console.log(`FAIL connect ${process.argv[2]}: ${e.message}`);
    process.exit(2);
  }
  const { nc, ctx } = conn;
  for (const [name, fn] of checks) {
    if (verbose) console.log(`... ${name}`);
    let timer;
    const limit = new Promise((_, reject) => {
      if (timeoutMs) {
        timer = setTimeout(() => reject(new CheckError(`timed out after ${timeoutMs} ms`)), timeoutMs);
      }
    });
    try {
      await Promise.race([fn(ctx), limit]);
      passed += 1;
    } catch (e) {
      failures.push(`${name}: ${describe(e)}`);
    } finally {
      clearTimeout(timer);
    }
  }
  await Promise.race([nc.close(), sleep(2000)]);
  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(`${passed} passed, ${failures.length} failed`);
  process.exit(failures.length ? 1 : 0);
}

export function main(open, opts) {
  run(open, opts).catch((e) => {
    console.log(`FAIL unexpected: ${e.stack || e}`);
    process.exit(3);
  });
}

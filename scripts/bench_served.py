"""Samples per second through the runner's served backend against the same server driven
by a plain client at the same concurrency: the runner should add no bottleneck.

    scripts/serve-fixture sh -c '"$(dirname "$CREG_SERVE_BIN")/python" scripts/bench_served.py \
        --runner target/debug/runner'

Starts transformers' serve (CREG_SERVE_BIN, from scripts/serve-fixture) on a Tiny
fixture model on the CPU, runs `runner --endpoint` (chat mode) over CREG action prompts
of one condition, then sends the same number of chat requests with the same sampling
body (prompts of the same task and condition, from `runner render`) from a thread pool
of the same size, and prints both figures. A random-weight model rarely stops early, so
both sides decode about max_tokens per sample.
"""
import argparse, concurrent.futures, json, os, pathlib, shutil, socket, subprocess, sys
import tempfile, time, urllib.request

p = argparse.ArgumentParser()
p.add_argument("--runner", required=True)
p.add_argument("--concurrency", type=int, default=8)
p.add_argument("--limit", type=int, default=2)
p.add_argument("--seeds", default="0,1")
p.add_argument("--max-tokens", type=int, default=32)
p.add_argument("--condition", default="full_graph")
a = p.parse_args()

tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-served-"))
model = tmp / "fixture-qwen2"
subprocess.run([a.runner, "fixture", "--arch", "qwen2", "--size", "tiny", "--out", str(model)],
               check=True, stdout=subprocess.DEVNULL)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
url = f"http://127.0.0.1:{port}/v1"
server = subprocess.Popen(
    [os.environ["CREG_SERVE_BIN"], "serve", str(model), "--device", "cpu", "--host", "127.0.0.1",
     "--port", str(port)],
    env={**os.environ, "OMP_NUM_THREADS": "1"},
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(480):
        try:
            urllib.request.urlopen(url + "/models", timeout=2)
            break
        except OSError:
            time.sleep(0.25)
    else:
        sys.exit("the server did not start")

    # The first generation warms the server (lazy init); neither side should pay it.
    warm = {"model": str(model), "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 4, "stream": False}
    urllib.request.urlopen(urllib.request.Request(
        url + "/chat/completions", json.dumps(warm).encode(),
        {"Content-Type": "application/json"}), timeout=600).read()
    started = time.perf_counter()
    subprocess.run([a.runner, "--model", str(model), "--endpoint", url, "--tasks", "action",
                    "--condition", a.condition, "--limit", str(a.limit), "--seeds", a.seeds,
                    "--max-new-tokens", str(a.max_tokens), "--concurrency", str(a.concurrency),
                    "--out", str(tmp / "runs"), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    runner_s = time.perf_counter() - started
    journal = tmp / "runs" / "fixture-qwen2" / "creg-v1.0" / "journal.jsonl"
    n = sum(1 for _ in open(journal))

    subprocess.run([a.runner, "render", "--task", "action", "--condition", a.condition,
                    "--out", str(tmp / "prompts")], check=True, stdout=subprocess.DEVNULL)
    lines = open(tmp / "prompts" / "action" / f"{a.condition}.jsonl").read().splitlines()
    seeds = [int(x) for x in a.seeds.split(",")]
    jobs = [(json.loads(lines[i // len(seeds)])["text"], seeds[i % len(seeds)]) for i in range(n)]

    def one(job):
        text, seed = job
        body = {"model": str(model), "messages": [{"role": "user", "content": text}],
                "temperature": 0.2, "top_p": 0.9, "max_tokens": a.max_tokens, "seed": seed,
                "stream": False,
                "generation_config": json.dumps({"do_sample": True, "top_k": 0, "min_p": 0.0,
                                                 "repetition_penalty": 1.0,
                                                 "max_new_tokens": a.max_tokens})}
        req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req, timeout=600))["usage"]["completion_tokens"]

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
        list(pool.map(one, jobs))
    plain_s = time.perf_counter() - started
    print(f"{n} samples, {a.max_tokens} new tokens at most, concurrency {a.concurrency}")
    print(f"runner --endpoint : {runner_s:6.1f} s  {n / runner_s:6.2f} samples/s (process start, "
          "connect probe, journal and reports included)")
    print(f"plain client      : {plain_s:6.1f} s  {n / plain_s:6.2f} samples/s")
finally:
    server.kill()
    server.wait()
    shutil.rmtree(tmp, ignore_errors=True)

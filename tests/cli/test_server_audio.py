#!/usr/bin/env python3
"""System test of `brisk serve`'s audio routes (POST /v1/audio/transcriptions and
/v1/audio/translations) with a random Whisper (tools/make_random_whisper.py) in the pool beside the
Qwen3 chat fixture: every response format, word timestamps, streaming (transcript.text.delta /
.done events), each model kind refusing the other's routes, bad input answered 4xx with a JSON
error while the server keeps serving (empty file, truncated WAV, text instead of audio, an
unknown language, a missing file, a 2 GB upload declared to the server that it must refuse rather
than hold), and the official OpenAI SDK's audio.transcriptions.create (when fetched).
Exit 77 = skipped."""
import http.client
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import wave

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHAT = os.path.join(SHARED, "models", "qwen3", "hf")
KEY = "audio-key"
MAX_AUDIO = 2_000_000

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wav_bytes(seconds, rate=16000, channels=1):
    path = os.path.join(tmp, f"a{seconds}_{rate}_{channels}.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        n = int(seconds * rate)
        w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * 300 * i / rate))) * channels
                               for i in range(n)))
    return open(path, "rb").read()


def multipart(fields, file_bytes, filename="speech.wav"):
    boundary = "----brisk" + uuid.uuid4().hex
    out = b""
    for k, v in fields:
        out += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
    if file_bytes is not None:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
                "Content-Type: audio/wav\r\n\r\n").encode() + file_bytes + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def post_audio(fields, file_bytes, path="/v1/audio/transcriptions", filename="speech.wav"):
    body, ctype = multipart(fields, file_bytes, filename)
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    c.request("POST", path, body=body, headers={"Content-Type": ctype, "Authorization": "Bearer " + KEY})
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, r.getheader("Content-Type", ""), data


def as_json(s):
    try:
        return json.loads(s)
    except ValueError:
        return None


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


tmp = tempfile.mkdtemp(prefix="brisk_audio_")
model = os.path.join(tmp, "whisper")
g = subprocess.run([sys.executable, os.path.join(SRC, "tools", "make_random_whisper.py"), model, "--shape", "tiny-test"],
                   capture_output=True, text=True)
if g.returncode != 0:
    print(g.stderr); sys.exit(1)
PORT = free_port()
args = [BIN, "serve", "--model", f"whisper={model}", "--port", str(PORT), "--api-key", KEY,
        "--max-audio", str(MAX_AUDIO), "--max-models", "2", "-t", "2", "--device", "cpu"]
have_chat = os.path.isdir(CHAT)
if have_chat:
    args += ["--model", f"qwen3={CHAT}", "--ctx", "512"]
server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
log = []
threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
        break
    except OSError:
        time.sleep(0.1)

try:
    speech = wav_bytes(3.0, rate=22050, channels=2)
    st, ct, body = post_audio([("model", "whisper"), ("language", "en")], speech)
    j = as_json(body)
    check(st == 200 and ct.startswith("application/json") and j is not None and set(j) == {"text", "usage"},
          f"json: {st} {ct} {body[:200]}")
    st, ct, body = post_audio([("model", "whisper"), ("response_format", "text")], speech)
    check(st == 200 and ct.startswith("text/plain") and body.endswith("\n"), f"text: {st} {ct} {body[:100]!r}")
    st, ct, body = post_audio([("model", "whisper"), ("response_format", "srt")], speech)
    check(st == 200 and body.startswith("1\n00:00:"), f"srt: {st} {body[:80]!r}")
    st, ct, body = post_audio([("model", "whisper"), ("response_format", "vtt")], speech)
    check(st == 200 and body.startswith("WEBVTT\n\n"), f"vtt: {st} {body[:80]!r}")
    st, ct, body = post_audio([("model", "whisper"), ("response_format", "verbose_json"),
                               ("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")], speech)
    v = as_json(body) or {}
    check(st == 200 and "segments" in v and "words" in v and abs(v.get("duration", 0) - 3.0) < 0.01,
          f"verbose_json: {st} {body[:200]}")
    st, ct, body = post_audio([("model", "whisper"), ("response_format", "json"), ("language", "de")], speech,
                              path="/v1/audio/translations")
    check(st == 200 and "text" in (as_json(body) or {}), f"translation: {st} {body[:200]}")
    # Streaming: deltas, then done with the whole text.
    body_bytes, ctype = multipart([("model", "whisper"), ("stream", "true")], wav_bytes(35.0))
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    c.request("POST", "/v1/audio/transcriptions", body=body_bytes, headers={"Content-Type": ctype, "Authorization": "Bearer " + KEY})
    r = c.getresponse()
    events = [json.loads(l[6:]) for l in r.read().decode().split("\n") if l.startswith("data: ")]
    c.close()
    deltas = [e for e in events if e.get("type") == "transcript.text.delta"]
    done = [e for e in events if e.get("type") == "transcript.text.done"]
    check(r.status == 200 and r.getheader("Content-Type", "").startswith("text/event-stream"), f"stream status {r.status}")
    check(len(done) == 1 and events[-1] is done[0], f"stream ends with one done event: {[e.get('type') for e in events]}")
    check(done and "".join(d["delta"] for d in deltas) == done[0]["text"], "deltas add up to the done text")

    # Model kinds keep to their routes.
    if have_chat:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        c.request("POST", "/v1/chat/completions", body=json.dumps({"model": "whisper", "messages": [{"role": "user", "content": "hi"}]}),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        r = c.getresponse()
        e = as_json(r.read().decode()) or {}
        check(r.status == 400 and "speech model" in e.get("error", {}).get("message", ""), f"chat to whisper: {r.status} {e}")
        st, ct, body = post_audio([("model", "qwen3")], speech)
        check(st == 400 and "not a speech-to-text model" in body, f"audio to qwen3: {st} {body}")
        c.request("POST", "/v1/chat/completions", body=json.dumps({"model": "qwen3", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        r = c.getresponse()
        r.read()
        check(r.status == 200, f"chat beside the speech model: {r.status}")
        c.close()

    # Bad input: 4xx with a JSON error naming the problem.
    def bad(fields, file_bytes, status, needle, param=None, filename="speech.wav"):
        st, ct, body = post_audio(fields, file_bytes, filename=filename)
        e = (as_json(body) or {}).get("error", {})
        check(st == status and needle in e.get("message", "") and (param is None or e.get("param") == param),
              f"{needle}: {st} {body[:300]}")

    bad([("model", "whisper")], b"", 400, "is empty", "file")
    truncated = wav_bytes(1.0)[:16000]
    bad([("model", "whisper")], truncated, 400, "truncated WAV")
    bad([("model", "whisper")], b"hello, this is text and not a sound file\n" * 10, 400, "not a readable audio file",
        filename="notes.txt")
    bad([("model", "whisper"), ("language", "xx")], speech, 400, "unsupported language 'xx'", "language")
    bad([("model", "whisper")], None, 400, "no 'file' part", "file")
    bad([("model", "nope")], speech, 404, "does not exist", "model")
    bad([("model", "whisper"), ("response_format", "xml")], speech, 400, "response_format", "response_format")
    bad([("model", "whisper")], b"\0" * (MAX_AUDIO + 10), 413, "")

    # A 2 GB upload: the declared length is over the limit, so the server answers 413 on the
    # head, before any of the body is read (it never holds it); the client's first megabytes
    # are drained, then the connection closes.
    before = rss_kb(server.pid)
    s = socket.create_connection(("127.0.0.1", PORT), timeout=60)
    s.sendall((f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 2147483648\r\n\r\n").encode())
    chunk = b"\0" * (1 << 20)
    t0 = time.time()
    peak = before
    try:
        for i in range(64):
            s.sendall(chunk)
            if i % 16 == 0:
                peak = max(peak, rss_kb(server.pid))
    except OSError:
        pass  # the server closed the connection after its answer
    resp = b""
    try:
        while b"\r\n\r\n" not in resp or len(resp.partition(b"\r\n\r\n")[2]) < 10:
            d = s.recv(65536)
            if not d:
                break
            resp += d
    except OSError:
        pass
    s.close()
    head, _, rest = resp.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n")[0].decode("latin-1")
    e = (as_json(rest.decode("utf-8", "replace")) or {}).get("error", {})
    check(" 413 " in status_line and "exceeds the limit" in e.get("message", ""), f"2 GB upload: {resp[:300]!r}")
    check(peak - before < 64 * 1024, f"2 GB upload held in memory: RSS {before} -> {peak} kB")
    print(f"2 GB upload: answer {status_line} after {time.time() - t0:.1f} s, RSS {before} -> peak {peak} kB")

    st, ct, body = post_audio([("model", "whisper")], speech)
    check(st == 200, f"still serving after bad input: {st}")

    # The official SDK (skipped when not fetched: scripts/fetch_server_test_assets.sh).
    sdk = os.path.join(SRC, "build", "test-assets", "server", "node_modules")
    if os.path.isdir(os.path.join(sdk, "openai")):
        audio_path = os.path.join(tmp, "sdk.wav")
        open(audio_path, "wb").write(speech)
        dst = os.path.join(os.path.dirname(sdk), "sdk_openai_audio.mjs")
        with open(os.path.join(SRC, "tests", "server", "sdk_openai_audio.mjs")) as f, open(dst, "w") as out:
            out.write(f.read())
        env = dict(os.environ, BRISK_URL=f"http://127.0.0.1:{PORT}/v1", BRISK_KEY=KEY, BRISK_MODEL="whisper",
                   BRISK_AUDIO=audio_path)
        p = subprocess.run(["node", dst], env=env, capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, f"sdk_openai_audio.mjs: {p.stdout}{p.stderr}")
        print(p.stdout.strip())
    else:
        print("note: SDK test skipped (run scripts/fetch_server_test_assets.sh)")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=30)
        check(rc == 0, f"exit code after SIGTERM {rc}")
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "server did not stop on SIGTERM")

if failures:
    print("".join(log[-30:]))
    print(f"{len(failures)} failures"); sys.exit(1)
print("server audio system test: ok")

#!/usr/bin/env python3
"""Model files as a new user gets them wrong, and `brisk quantize`'s guards:

- formats are told apart by content: a text file named .gguf, a lone .safetensors file, a folder
  without config.json, and a GGUF of an unknown architecture each get an error naming the file
  and the problem (inspect still lists what it can, then exits 1);
- quantize keeps the folder's chat_template.jinja, refuses to write over its input (the same
  path, another spelling of it, a link to it), refuses an input that is already quantized unless
  --allow-requantize (and then says so), and shows a progress line on a terminal only.

Runs on a tiny Llama checkpoint written by tiny_hf.py (no shared data needed)."""
import os
import pty
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402
from cli_util import BIN, brisk, main, one_error_line  # noqa: E402


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, arch):
    """A GGUF v3 file with general.architecture = arch and one 32-float F32 tensor."""
    kv = gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string(arch)
    info = gguf_string("weight") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<IQ", 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + info
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + struct.pack("<32f", *range(32)))


def gguf_metadata_string(path, key):
    """The string value of `key` in a GGUF file (None when absent)."""
    b = open(path, "rb").read()
    n_kv = struct.unpack_from("<Q", b, 16)[0]
    pos = 24

    def string():
        nonlocal pos
        n = struct.unpack_from("<Q", b, pos)[0]
        s = b[pos + 8:pos + 8 + n]
        pos += 8 + n
        return s.decode("utf-8", "replace")
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, pos)
            pos += 12
            for _ in range(n):
                skip(et)
            return None
        pos += sizes[t]
        return None
    for _ in range(n_kv):
        k = string()
        t = struct.unpack_from("<I", b, pos)[0]
        pos += 4
        v = skip(t)
        if k == key:
            return v
    return None


def on_terminal(args):
    """Runs brisk with stdout and stderr on a pseudo-terminal; returns (exit status, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(BIN, [BIN, *args])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def run_checks(check, tmp):
    model = tiny_hf.write(os.path.join(tmp, "tiny"))

    # ---- formats by content ---------------------------------------------------------------
    text = os.path.join(tmp, "notes.gguf")
    with open(text, "w") as f:
        f.write("these are my notes, not a model\n")
    for cmd in (["inspect", text], ["generate", text, "-p", "x"], ["quantize", text, os.path.join(tmp, "o.gguf"), "Q8_0"]):
        r = brisk(*cmd)
        check("text file named .gguf: %s" % cmd[0], one_error_line(r, cmd[0]) and "not a model file" in r.stderr
              and "text file" in r.stderr and text in r.stderr, r.stderr)

    lone = os.path.join(tmp, "lone")
    os.makedirs(lone)
    shutil.copy(os.path.join(model, "model.safetensors"), os.path.join(lone, "weights.safetensors"))
    r = brisk("generate", os.path.join(lone, "weights.safetensors"), "-p", "x")
    check("lone safetensors: generate", one_error_line(r, "generate") and "config.json" in r.stderr
          and "not a GGUF" not in r.stderr, r.stderr)
    r = brisk("inspect", os.path.join(lone, "weights.safetensors"))
    check("lone safetensors: inspect lists it", "format:       safetensors" in r.stdout, r.stdout[:300])
    check("lone safetensors: inspect says the architecture is unknown", one_error_line(r, "inspect")
          and "architecture is unknown" in r.stderr, r.stderr)
    r = brisk("generate", lone, "-p", "x")
    check("folder without config.json", one_error_line(r, "generate") and "no config.json" in r.stderr
          and lone in r.stderr, r.stderr)
    # The same safetensors file inside its folder loads: the folder is the model.
    r = brisk("generate", os.path.join(model, "model.safetensors"), "--prompt-ids", "1,2", "-n", "2", "-t", "1")
    check("safetensors file with config.json beside it", r.returncode == 0, r.stderr)

    unknown = os.path.join(tmp, "unknown.gguf")
    write_gguf(unknown, "mamba9")
    r = brisk("inspect", unknown)
    check("unknown architecture: inspect lists it", "architecture: mamba9 (not supported by brisk)" in r.stdout, r.stdout)
    check("unknown architecture: inspect exit 1", one_error_line(r, "inspect") and "mamba9" in r.stderr, r.stderr)
    out = os.path.join(tmp, "unknown-q8.gguf")
    r = brisk("quantize", unknown, out, "Q8_0")
    check("unknown architecture: quantize exit 1", one_error_line(r, "quantize") and "mamba9" in r.stderr, r.stderr)
    check("unknown architecture: nothing written", not os.path.exists(out))

    # ---- quantize ---------------------------------------------------------------------------
    f32 = os.path.join(tmp, "tiny-f32.gguf")
    r = brisk("quantize", model, f32, "F32")
    check("HF folder to GGUF", r.returncode == 0, r.stderr)
    want = open(os.path.join(model, "chat_template.jinja")).read()
    check("chat_template.jinja kept", r.returncode == 0 and gguf_metadata_string(f32, "tokenizer.chat_template") == want,
          gguf_metadata_string(f32, "tokenizer.chat_template") if r.returncode == 0 else "")
    check("no progress line when not on a terminal", "quantizing" not in r.stderr and "\r" not in r.stderr, r.stderr)

    before = open(f32, "rb").read()
    alias = os.path.join(tmp, ".", "sub", "..", "tiny-f32.gguf")
    os.makedirs(os.path.join(tmp, "sub"), exist_ok=True)
    link = os.path.join(tmp, "link.gguf")
    os.symlink(f32, link)
    for name, out in [("same path", f32), ("another spelling", alias), ("a link to it", link)]:
        r = brisk("quantize", f32, out, "Q8_0")
        check("output is the input (%s)" % name, one_error_line(r, "quantize") and "is the input" in r.stderr, r.stderr)
    check("input untouched", open(f32, "rb").read() == before)

    q8 = os.path.join(tmp, "tiny-q8_0.gguf")
    r = brisk("quantize", f32, q8, "Q8_0")
    check("F32 to Q8_0", r.returncode == 0 and "requantized" not in r.stderr, r.stderr)
    q4 = os.path.join(tmp, "tiny-q4_0.gguf")
    r = brisk("quantize", q8, q4, "Q4_0")
    check("quantized input refused", one_error_line(r, "quantize") and "already quantized" in r.stderr
          and "--allow-requantize" in r.stderr and not os.path.exists(q4), r.stderr)
    r = brisk("quantize", q8, q4, "Q4_0", "--allow-requantize")
    check("--allow-requantize", r.returncode == 0 and "requantized" in r.stderr and os.path.exists(q4), r.stderr)

    status, out = on_terminal(["quantize", f32, os.path.join(tmp, "tty-q8.gguf"), "Q8_0"])
    check("progress line on a terminal", status == 0 and "quantizing [" in out, out[-400:])


if __name__ == "__main__":
    sys.exit(main("test_model_files", run_checks))

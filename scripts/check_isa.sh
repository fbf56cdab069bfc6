#!/usr/bin/env bash
# Fails when an object of the build holds an instruction outside its unit's ISA level.
#
# Each unit's level comes from src/core/isa_levels.def, the table CMake takes the flags from:
# *_<suffix>.cpp is compiled with the baseline flags plus its level's features' flags, every
# other file with the baseline flags alone (x86-64-v2: no VEX, no EVEX). The script
#   1. reads compile_commands.json and checks that each object of libbrisk, the binary, the
#      tests and the benchmarks was compiled with exactly the -m flags its level gives;
#   2. disassembles each object (objdump, raw bytes shown so that VEX / EVEX encodings are
#      told apart) and names every instruction that needs a flag the unit was not given, e.g.
#      a VEX {vex} vpdpbusd (AVX-VNNI) in an AVX-512 unit, any ymm register in a baseline unit;
#   3. checks the inline and template functions (weak symbols) that units of different levels
#      each compile: the linker keeps one copy for every caller, so each copy must lie within
#      the lowest of those levels.
# usage: scripts/check_isa.sh BUILD_DIR        check the objects of a configured, built tree
#        scripts/check_isa.sh --self-test CXX  compile small units that break each rule and
#                                              check that each is reported
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$src" "$@" <<'PY'
import json, os, re, shlex, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

SRC = sys.argv[1]
ARGS = sys.argv[2:]
TABLE = os.path.join(SRC, "src/core/isa_levels.def")

# ---- the table --------------------------------------------------------------------------------

def read_table(path):
    text = open(path).read()
    base = re.search(r'^BRISK_ISA_BASELINE\("([^"]*)"\)', text, re.M)
    if not base:
        sys.exit(f"check_isa: {path}: no BRISK_ISA_BASELINE line")
    features = {m[0]: m[1].split() for m in
                re.findall(r'^BRISK_CPU_FEATURE\((\w+),\s*"([^"]*)",\s*"([^"]*)"\)', text, re.M)}
    levels = []
    for lid, name, suffix, feats in re.findall(
            r'^BRISK_ISA_LEVEL\((\w+),\s*"([^"]*)",\s*"([^"]*)",\s*"([^"]*)"\)', text, re.M):
        flags = []
        for f in feats.split():
            if f not in features:
                sys.exit(f"check_isa: {path}: level {lid} names an unknown feature {f}")
            flags += features[f]
        levels.append({"name": name, "suffix": suffix, "flags": flags})
    if not levels:
        sys.exit(f"check_isa: {path}: no BRISK_ISA_LEVEL lines")
    return base.group(1).split(), levels

BASE_FLAGS, LEVELS = read_table(TABLE)

def level_of(source):
    """(level name, the -m flags its units are compiled with) of a source file."""
    stem = os.path.basename(source)
    for lv in LEVELS:
        if stem.endswith("_" + lv["suffix"] + ".cpp"):
            return lv["name"], BASE_FLAGS + lv["flags"]
    return "baseline", list(BASE_FLAGS)

# GCC's implications between its ISA flags (what one -m flag turns on besides itself).
V2 = ["-msse", "-msse2", "-msse3", "-mssse3", "-msse4.1", "-msse4.2", "-mpopcnt", "-mcx16", "-msahf"]
IMPLIES = {
    "-march=x86-64-v2": V2,
    "-mavx": ["-msse4.2"], "-mavx2": ["-mavx"], "-mfma": ["-mavx"], "-mf16c": ["-mavx"],
    "-mavxvnni": ["-mavx2"], "-mavx512f": ["-mavx2"], "-mgfni": ["-msse2"],
    "-mvaes": ["-mavx2"], "-mvpclmulqdq": ["-mavx"], "-msse4.2": ["-msse4.1"], "-msse4.1": ["-mssse3"],
}
for f in ["bw", "vl", "dq", "cd", "vnni", "vbmi", "vbmi2", "bitalg", "vpopcntdq", "ifma", "bf16", "fp16"]:
    IMPLIES["-mavx512" + f] = ["-mavx512f"]

def closure(flags):
    out, todo = set(), list(flags)
    while todo:
        f = todo.pop()
        if f not in out:
            out.add(f)
            todo += IMPLIES.get(f, [])
    return out

# ---- what an instruction needs ------------------------------------------------------------------

LEGACY_PREFIXES = {0x66, 0x67, 0xf2, 0xf3, 0x2e, 0x3e, 0x26, 0x36, 0x64, 0x65, 0xf0}
MNEMONIC_PREFIXES = {"{vex}", "{vex3}", "{evex}", "rep", "repz", "repe", "repnz", "repne", "lock",
                     "notrack", "bnd", "data16", "addr32", "cs", "ds", "es", "ss", "fs", "gs",
                     "xacquire", "xrelease"}

def encoding(raw):
    """'vex', 'evex', 'evex-fp16' (opcode maps 5 and 6), 'xop' or 'legacy' from the bytes."""
    i = 0
    while i < len(raw) and raw[i] in LEGACY_PREFIXES:
        i += 1
    if i < len(raw) and 0x40 <= raw[i] <= 0x4f:
        return "legacy"  # REX: never before a VEX / EVEX prefix
    if i >= len(raw):
        return "legacy"
    b = raw[i]
    if b in (0xc4, 0xc5):
        return "vex"
    if b == 0x62:
        return "evex-fp16" if i + 1 < len(raw) and (raw[i + 1] & 0x7) in (5, 6) else "evex"
    if b == 0x8f and i + 1 < len(raw) and (raw[i + 1] & 0x1f) >= 8:
        return "xop"
    return "legacy"

def mset(*names):
    return set(names)

FMA3 = re.compile(r"^vf(n?m(add|sub)|maddsub|msubadd)(132|213|231)(ps|pd|ss|sd)$")
FMA4 = re.compile(r"^vf(n?m(add|sub)|maddsub|msubadd)(ps|pd|ss|sd)$")
FP16 = re.compile(r"(ph|sh)[xyz]?$")
AVX2_ONLY = mset("vbroadcasti128", "vinserti128", "vextracti128", "vperm2i128", "vpermd", "vpermq",
                 "vpermps", "vpermpd", "vpblendd", "vpmaskmovd", "vpmaskmovq", "vpsllvd", "vpsllvq",
                 "vpsrlvd", "vpsrlvq", "vpsravd", "vgatherdps", "vgatherdpd", "vgatherqps", "vgatherqpd",
                 "vpgatherdd", "vpgatherdq", "vpgatherqd", "vpgatherqq")
AVX1_VP = mset("vpermilps", "vpermilpd", "vperm2f128", "vpclmulqdq", "vptest")
VNNI = mset("vpdpbusd", "vpdpbusds", "vpdpwssd", "vpdpwssds")
VNNI_INT = re.compile(r"^vpdp(b[su][su]|w[su][su])ds?$")
BMI1 = mset("andn", "bextr", "blsi", "blsmsk", "blsr")
BMI2 = mset("bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx")
KMASK = re.compile(r"^k(mov|and|andn|or|xor|xnor|not|shiftl|shiftr|unpck|ortest|test|add)[bwdq]?[bwdq]?$")
AMX = re.compile(r"^(ldtilecfg|sttilecfg|tileloadd(t1)?|tilestored|tilerelease|tilezero|tdp\w+)$")
BY_MNEMONIC = [  # (pattern, flag) for the extensions recognised by name alone
    (mset("vpermb", "vpermi2b", "vpermt2b", "vpmultishiftqb"), "-mavx512vbmi"),
    (re.compile(r"^(vpcompress[bw]|vpexpand[bw]|vpsh[lr]dv?[wdq])$"), "-mavx512vbmi2"),
    (mset("vpopcntb", "vpopcntw", "vpshufbitqmb"), "-mavx512bitalg"),
    (mset("vpopcntd", "vpopcntq"), "-mavx512vpopcntdq"),
    (re.compile(r"^(vpconflict[dq]|vplzcnt[dq]|vpbroadcastm(b2q|w2d))$"), "-mavx512cd"),
    (re.compile(r"^v?gf2p8(affineqb|affineinvqb|mulb)$"), "-mgfni"),
    (mset("vcvtne2ps2bf16", "vdpbf16ps"), "-mavx512bf16"),
    (re.compile(r"^(vexp2p[sd]|vrcp28\w+|vrsqrt28\w+|v(gather|scatter)pf\w+)$"), "-mavx512er"),
    (re.compile(r"^(v4fn?madd\w+|vp4dpwssds?)$"), "-mavx5124fmaps"),
    (re.compile(r"^vp2intersect[dq]$"), "-mavx512vp2intersect"),
    (AMX, "-mamx-tile"),
    (BMI1, "-mbmi"), (BMI2, "-mbmi2"),
    (mset("lzcnt"), "-mlzcnt"), (mset("popcnt"), "-mpopcnt"), (mset("movbe"), "-mmovbe"),
    (mset("adcx", "adox"), "-madx"), (mset("rdrand"), "-mrdrnd"), (mset("rdseed"), "-mrdseed"),
    (re.compile(r"^(sha1\w+|sha256\w+)$"), "-msha"), (mset("crc32b", "crc32w", "crc32l", "crc32q", "crc32"), "-msse4.2"),
    (mset("extrq", "insertq", "movntss", "movntsd"), "-msse4a"),
]

def matches(pattern, m):
    return m in pattern if isinstance(pattern, set) else bool(pattern.match(m))

def needs(raw, mnemonic, operands, vex_prefix):
    """The -m flags an instruction needs (a compiler would emit it only with them)."""
    enc = "vex" if vex_prefix else encoding(raw)
    m = mnemonic
    out = set()
    if enc == "evex-fp16":
        out.add("-mavx512fp16")
        enc = "evex"
    wide = "%ymm" in operands or "%zmm" in operands
    if enc in ("vex", "evex", "xop") or wide:
        out.add("-mavx")
    if enc == "xop":
        out.add("-mxop")
    evex = enc == "evex" or "%zmm" in operands or re.search(r"%[xyz]mm(1[6-9]|2\d|3[01])\b", operands) \
        or re.search(r"%k[0-7]", operands) or "{1to" in operands or "-sae}" in operands
    if evex or KMASK.match(m):
        out.add("-mavx512f")
    if enc == "vex":
        if FMA3.match(m):
            out.add("-mfma")
        elif FMA4.match(m):
            out.add("-mfma4")
        if m in ("vcvtph2ps", "vcvtps2ph"):
            out.add("-mf16c")
        if m in AVX2_ONLY or m.startswith("vpbroadcast") or (
                m.startswith("vp") and "%ymm" in operands and m not in AVX1_VP):
            out.add("-mavx2")
        if m in VNNI:
            out.add("-mavxvnni")
        if m == "vcvtneps2bf16" or m.startswith("vbcstne") or m.startswith("vcvtnee") or m.startswith("vcvtneo"):
            out.add("-mavxneconvert")
        if m in ("vpmadd52luq", "vpmadd52huq"):
            out.add("-mavxifma")
    elif evex:
        if m in VNNI:
            out.add("-mavx512vnni")
        if m == "vcvtneps2bf16":
            out.add("-mavx512bf16")
        if m in ("vpmadd52luq", "vpmadd52huq"):
            out.add("-mavx512ifma")
    if VNNI_INT.match(m) and m not in VNNI:
        out.add("-mavxvnniint8" if m.startswith("vpdpb") else "-mavxvnniint16")
    if FP16.search(m) and m.startswith("v") and m not in ("vcvtph2ps", "vcvtps2ph") or m == "vmovw":
        out.add("-mavx512fp16")
    if m.startswith(("vaes", "aes")):
        out.add("-mvaes" if wide else "-maes")
    if m in ("pclmulqdq", "vpclmulqdq"):
        out.add("-mvpclmulqdq" if wide else "-mpclmul")
    for pattern, flag in BY_MNEMONIC:
        if matches(pattern, m):
            out.add(flag)
    return out

# Instructions outside their unit's level that run only behind a run-time check of their own:
# (source file, function name as demangled without its arguments, mnemonic) -> why.
ALLOWED = {
    ("src/core/cpu_features.cpp", "brisk::(anonymous namespace)::probe_amx", "tilerelease"):
        "the AMX probe, run under a SIGILL guard after the kernel grants tile state",
}

# ---- objects ----------------------------------------------------------------------------------

FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")
INSN = re.compile(r"^\s*[0-9a-f]+:\t([0-9a-f ]+)\t(.*)$")
SYM = re.compile(r"^[0-9a-f]+ (.{7}) (\S+)\t[0-9a-f]+ (.*)$")

def disassemble(obj):
    """{function: {flag: first instruction needing it}} and the set of weak functions."""
    out = subprocess.run(["objdump", "-d", "-t", "-w", "--insn-width=15", obj], capture_output=True,
                         text=True, errors="replace")
    if out.returncode != 0:
        raise SystemExit(f"check_isa: objdump failed on {obj}: {out.stderr.strip()}")
    weak, funcs, cur, n = set(), {}, None, 0
    for line in out.stdout.splitlines():
        s = SYM.match(line)
        if s:
            if s.group(1)[1] == "w" and s.group(1)[6] == "F":
                weak.add(s.group(3).split()[-1])
            continue
        f = FUNC.match(line)
        if f:
            cur = funcs.setdefault(f.group(1), {})
            continue
        i = INSN.match(line)
        if not i or cur is None:
            continue
        raw = bytes(int(b, 16) for b in i.group(1).split())
        words = i.group(2).split(None, 1)
        vex_prefix = False
        while words and words[0] in MNEMONIC_PREFIXES:
            vex_prefix |= words[0] in ("{vex}", "{vex3}")
            words = words[1].split(None, 1) if len(words) > 1 else []
        if not words:
            continue
        n += 1
        for flag in needs(raw, words[0], words[1] if len(words) > 1 else "", vex_prefix):
            cur.setdefault(flag, i.group(2).strip())
    return funcs, weak, n

def demangle(names):
    names = list(names)
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return dict(zip(names, out.stdout.splitlines())) if out.returncode == 0 else {n: n for n in names}

def without_args(name):
    depth, i = 0, len(name)
    for j in range(len(name) - 1, -1, -1):  # the last top-level '(' opens the arguments
        c = name[j]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                i = j
                break
    return name[:i]

def member_sources(source):
    """The files an object was compiled from: the source itself, or for a unity batch
    (BRISK_UNITY_BUILD, CMake's Unity/unity_N_cxx.cxx) the files it includes."""
    if not re.search(r"/Unity/unity_\d+_cxx\.cxx$", source):
        return [source]
    try:
        return re.findall(r'^#include "([^"]+)"', open(source).read(), re.M)
    except OSError:
        return [source]

def check(units):
    """units: list of (source, object, level name, flags). Returns [(source, message)], total."""
    failures, weak_copies = [], {}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda u: disassemble(u[1]), units))
    all_names = set()
    for funcs, _, _ in results:
        all_names |= funcs.keys()
    names = demangle(all_names)
    total = 0
    for (source, obj, level, flags), (funcs, weak, n) in zip(units, results):
        total += n
        allowed = closure(flags)
        for fn, need in funcs.items():
            if fn in weak:
                weak_copies.setdefault(fn, []).append((source, level, allowed, need))
            for flag, insn in sorted(need.items()):
                if flag in allowed:
                    continue
                mnemonic = [w for w in insn.split() if w not in MNEMONIC_PREFIXES][0]
                if any(any(f.endswith("/" + path) for f in member_sources(source))
                       and func == without_args(names.get(fn, fn)) and m == mnemonic
                       for path, func, m in ALLOWED):
                    continue
                failures.append((source, f"{names.get(fn, fn)}: '{insn}' needs {flag}"))
    for fn, copies in sorted(weak_copies.items()):
        if len({c[1] for c in copies}) < 2:
            continue
        common = set.intersection(*(c[2] for c in copies))
        for source, level, _, need in copies:
            for flag, insn in sorted(need.items()):
                if flag not in common:
                    others = ", ".join(f"{display(o)} ({l})" for o, l, _, _ in copies if o != source)
                    failures.append((source, f"inline {names.get(fn, fn)}: '{insn}' needs {flag}, and the linker "
                                             f"may keep this copy for the callers in {others}"))
    return failures, total

def display(source):
    return os.path.relpath(source, SRC) if source.startswith(SRC + "/") else source

def units_of_build(build):
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        sys.exit(f"check_isa: {path} is missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)")
    units, failures, missing = [], [], []
    targets = ("/brisk.dir/", "/brisk_cli.dir/", "/brisk_tests.dir/", "/brisk_microbench.dir/")
    for e in json.load(open(path)):
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        if "-o" not in args:
            continue
        obj = os.path.join(e["directory"], args[args.index("-o") + 1])
        if not any(t in obj for t in targets) or not e["file"].endswith((".cpp", ".cxx")):
            continue
        level, flags = level_of(e["file"])
        used = [a for a in args if a.startswith("-m")]
        if sorted(used) != sorted(flags):
            extra = [f for f in used if f not in flags]
            lacking = [f for f in flags if f not in used]
            if extra:
                failures.append((e["file"], f"compiled with {' '.join(extra)}, which its level {level} does not have"))
            if lacking:
                failures.append((e["file"], f"compiled without {' '.join(lacking)} of its level {level}"))
        if not os.path.exists(obj):
            missing.append(obj)
            continue
        units.append((e["file"], obj, level, flags))
    lib_missing = [m for m in missing if "/brisk.dir/" in m]
    if lib_missing:
        sys.exit(f"check_isa: {len(lib_missing)} objects of libbrisk are not built, e.g. {lib_missing[0]}")
    if not any(u[2] != "baseline" for u in units):
        sys.exit("check_isa: no ISA-level unit in this build (not an x86-64 build?)")
    return units, failures

# ---- self test ----------------------------------------------------------------------------------

SELF_TEST = {  # file name -> (source, the text a report must contain; None: must pass)
    "plain.cpp": ("float sum(const float* x, int n) { float s = 0; for (int i = 0; i < n; ++i) s += x[i]; return s; }", None),
    "bad.cpp": ("#include <immintrin.h>\n__attribute__((target(\"avx2\"))) __m256i f(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }",
                     "needs -mavx"),
    "dot_avx512.cpp": ("#include <immintrin.h>\n__attribute__((target(\"avxvnni\"))) __m256i f(__m256i a, __m256i b, __m256i c) { return _mm256_dpbusd_avx_epi32(a, b, c); }",
                       "needs -mavxvnni"),
    "ok_avx512.cpp": ("#include <immintrin.h>\n__m256i f(__m256i a, __m256i b, __m256i c) { return _mm256_dpbusd_epi32(a, b, c); }\n"
                      "__m512i g(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }", None),
    "perm_avx512.cpp": ("#include <immintrin.h>\n__attribute__((target(\"avx512vbmi\"))) __m512i f(__m512i a, __m512i b) { return _mm512_permutexvar_epi8(a, b); }",
                        "needs -mavx512vbmi"),
    "shared_avx2.cpp": ("#include <immintrin.h>\ninline __attribute__((noinline)) void scale(float* x, int n) { for (int i = 0; i < n; ++i) x[i] *= 3.0f; }\n"
                        "void (*use_avx2())(float*, int) { return scale; }", "the linker may keep this copy"),
    "shared.cpp": ("inline __attribute__((noinline)) void scale(float* x, int n) { for (int i = 0; i < n; ++i) x[i] *= 3.0f; }\n"
                   "void (*use_base())(float*, int) { return scale; }", None),
    "zmm_avx2.cpp": ("#include <immintrin.h>\n__attribute__((target(\"avx512f\"))) __m512 f(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }",
                     "needs -mavx512f"),
    "half_avx512.cpp": ("#include <immintrin.h>\n__attribute__((target(\"avx512fp16\"))) __m512h f(__m512h a, __m512h b) { return _mm512_add_ph(a, b); }",
                        "needs -mavx512fp16"),
    "bmi_avx2.cpp": ("unsigned f(unsigned a, unsigned b) { return __builtin_ia32_pdep_si(a, b); }", None),
    "bmi.cpp": ("__attribute__((target(\"bmi2\"))) unsigned f(unsigned a, unsigned b) { return __builtin_ia32_pdep_si(a, b); }",
                "needs -mbmi2"),
}

def self_test(cxx):
    tmp = tempfile.mkdtemp(prefix="check_isa.")
    units = []
    for name, (code, _) in SELF_TEST.items():
        path = os.path.join(tmp, name)
        open(path, "w").write(code + "\n")
        level, flags = level_of(path)
        obj = path + ".o"
        subprocess.run([cxx, "-O3", "-c", path, "-o", obj] + flags, check=True)
        units.append((path, obj, level, flags))
    failures, _ = check(units)
    shutil.rmtree(tmp)
    bad = []
    for name, (_, expect) in SELF_TEST.items():
        mine = [m for src, m in failures if src == os.path.join(tmp, name)]
        if expect is None and mine:
            bad.append(f"{name}: reported, though within its level: {mine[0]}")
        if expect is not None and not any(expect in f for f in mine):
            bad.append(f"{name}: not reported (expected '{expect}')")
    for b in bad:
        print("check_isa self-test:", b)
    if bad:
        sys.exit(1)
    print(f"check_isa self-test: {len(SELF_TEST)} units, every rule reported where it is broken and only there")

# ---- main -----------------------------------------------------------------------------------------

for tool in ("objdump", "c++filt"):
    if not shutil.which(tool):
        sys.exit(f"check_isa: {tool} (GNU binutils) is not installed")

if len(ARGS) == 2 and ARGS[0] == "--self-test":
    self_test(ARGS[1])
    sys.exit(0)
if len(ARGS) != 1:
    sys.exit("usage: scripts/check_isa.sh BUILD_DIR | --self-test CXX")
units, failures = units_of_build(ARGS[0])
more, total = check(units)
failures = sorted(failures + more, key=lambda f: f[0])
level_of_source = {u[0]: (u[1], u[2]) for u in units}
last = None
for source, message in failures:
    if source != last:
        obj, level = level_of_source.get(source, ("", level_of(source)[0]))
        where = f" ({os.path.relpath(obj, ARGS[0])})" if obj else ""
        print(f"check_isa: {display(source)}{where}, level {level}:")
        last = source
    print(f"  {message}")
levels = {}
for u in units:
    levels[u[2]] = levels.get(u[2], 0) + 1
summary = ", ".join(f"{n} {l}" for l, n in sorted(levels.items()))
if failures:
    print(f"check_isa: FAILED: {len(failures)} functions or units with instructions or flags outside their "
          f"unit's level ({summary} units; levels from src/core/isa_levels.def)")
    sys.exit(1)
print(f"check_isa: {total} instructions of {len(units)} objects ({summary}) within their unit's level")
PY

#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/corpus.json: the tokenizer test corpus (deterministic).

Hand-written strings in many scripts and languages, code, emoji, whitespace runs, digit
runs, special-token text and unusual Unicode, plus systematic combinations of them.
Run: python3 tools/tokenizer/make_corpus.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizer", "corpus.json")

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
    " Hello world",
    "Hello World",
    "HELLO WORLD!!!",
    "I'm sure you'll see it's what they've done; we'd said we're ready.",
    "I'M SURE YOU'LL SEE IT'S WHAT THEY'VE DONE",
    "don't won't can't shouldn't y'all o'clock rock'n'roll",
    "Mr. O'Neil's dog—a 3-year-old—barked at 5:30 a.m.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "Well... that was unexpected?! (Or was it?) [Maybe] {Surely} <not>",
    "e-mail: someone@example.com, web: https://example.org/path?q=1&r=two#frag",
    "C:\\Users\\admin\\Documents\\file.txt",
    "/usr/local/bin/python3 --version",
    "Ünicode naïve café résumé coöperate façade jalapeño",
    "Größe, Straße, Maß, Fußgänger, Äpfel, Öl, Übermut",
    "L'été dernier, nous sommes allés à la plage près de Nîmes.",
    "¿Dónde está la biblioteca? ¡Está cerca de la estación!",
    "A ação da população não é fácil, irmão.",
    "Zażółć gęślą jaźń. Pchnąć w tę łódź jeża.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Türkçe karakterler: ğüşıöç ĞÜŞİÖÇ, İstanbul ve ıslak.",
    "Tiếng Việt có nhiều dấu: Hà Nội, thành phố Hồ Chí Minh.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "Український текст: їжак, ґанок, Європа.",
    "Български език и македонски јазик, српски језик.",
    "עברית: שלום עולם, מה שלומך?",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "فارسی: سلام دنیا، حال شما چطور است؟",
    "اردو: ہیلو دنیا",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "বাংলা: হ্যালো বিশ্ব",
    "தமிழ்: வணக்கம் உலகம்",
    "తెలుగు: హలో ప్రపంచం",
    "ਪੰਜਾਬੀ: ਸਤ ਸ੍ਰੀ ਅਕਾਲ",
    "ગુજરાતી: નમસ્તે",
    "മലയാളം: ഹലോ വേൾഡ്",
    "ಕನ್ನಡ: ನಮಸ್ಕಾರ",
    "සිංහල: ආයුබෝවන්",
    "ไทย: สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ລາວ: ສະບາຍດີ",
    "ខ្មែរ: សួស្តីពិភពលោក",
    "မြန်မာ: မင်္ဂလာပါ",
    "ქართული: გამარჯობა მსოფლიო",
    "Հայերեն: Բարեւ աշխարհ",
    "አማርኛ: ሰላም ልዑል",
    "ᐃᓄᒃᑎᑐᑦ: ᐊᐃ",
    "Cherokee: ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
    "中文：你好，世界！今天天气很好。",
    "繁體中文：這是一個測試句子。",
    "日本語：こんにちは世界。カタカナとひらがなと漢字。",
    "ｶﾀｶﾅ 半角カナ ﾃｽﾄ",
    "한국어: 안녕하세요 세계! 반갑습니다.",
    "Mongolian: Монгол хэл ᠮᠣᠩᠭᠣᠯ",
    "Tibetan: བོད་ཡིག",
    "Yi: ꆈꌠꉙ",
    "Math: ∀x∈ℝ, ∃y: x² + y² ≥ 2xy ⇒ √(x²) = |x|",
    "Ligatures ﬁ ﬂ ﬀ ﬃ and fullwidth ＡＢＣ１２３",
    "𝕳𝖊𝖑𝖑𝖔 𝓦𝓸𝓻𝓵𝓭 𝟙𝟚𝟛",
    "Roman numerals Ⅰ Ⅱ Ⅲ Ⅳ ⅻ and circled ① ② ③",
    "Currency: $100, €50, £30, ¥1000, ₹500, ₿0.5, ¢",
    "Temperature: 25°C = 77°F; angle 90° ± 0.5′",
    "Quotes: “double” ‘single’ «guillemets» „German“ 「Japanese」",
    "Dashes: - – — ― and ellipsis … and bullet •",
]

CODE = [
    "def main():\n    return 42  # answer\n",
    "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
    "template <typename T>\nstd::vector<T> v{1, 2, 3};\nauto x = v[0] << 2 >> 1;",
    "const f = async (x) => { await fetch(`/api/${x}`); return x ?? null; };",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let mut v: Vec<u8> = vec![];\n    Ok(())\n}",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><head><title>Test</title></head><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "for i in $(seq 1 10); do echo \"$i\" | grep -E '^[0-9]+$' >> out.log; done",
    "x = [i**2 for i in range(100) if i % 3 == 0]\nprint(f\"{x!r:>20}\")",
    "if (a != b && c <= d || !e) { x += 1; y -= 2; z *= 3; w /= 4; }",
    "    indented with four spaces\n        and eight\n\t\tand two tabs",
    "// comment\n/* block\n   comment */\n#define MAX(a, b) ((a) > (b) ? (a) : (b))",
    "matrix = [[1, 0, 0],\n          [0, 1, 0],\n          [0, 0, 1]]",
    "git commit -m \"fix: handle edge case\" && git push origin main",
    "<?php echo $_GET['name']; ?>",
    "λx.λy.x y  -- lambda calculus\nmap (+1) [1..10]",
    "diff --git a/file b/file\n@@ -1,3 +1,4 @@\n-old line\n+new line\n",
    "base64: SGVsbG8gV29ybGQhIFRoaXMgaXMgYSB0ZXN0Lg==",
    "hex: 0xDEADBEEF 0x00ff 0b1010_1010 1e-9 3.14159265358979",
    "uuid: 123e4567-e89b-12d3-a456-426614174000",
    "\"\"\"docstring with 'quotes' and \\\"escapes\\\"\"\"\"",
    "regex: ^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.\\w{2,}$",
    "__init__ __name__ == '__main__' self._private_var",
    "camelCaseIdentifier PascalCase snake_case SCREAMING_CASE kebab-case",
]

EMOJI = [
    "🦙 llama",
    "😀😃😄😁😆😅😂🤣",
    "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "👨‍👩‍👧‍👦 family",
    "🏳️‍🌈 🏴‍☠️ flags",
    "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷",
    "1️⃣ 2️⃣ #️⃣ *️⃣",
    "❤️ ♥ ❤ 💔 💕",
    "I ❤️ NY 🗽 and 🍕!",
    "🧑‍💻 coding at 3am ☕☕☕",
    "emoji with text🙂inside🙃words",
    "🤖🤖🤖🤖🤖🤖🤖🤖🤖🤖",
    "🫠🫡🫥 new ones",
    "⌚⌛⏰⏳ ☀☁☂☃",
]

WHITESPACE = [
    "", " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\t\n", "\r\n", "\r\n\r\n",
    " \n ", "  \n  \n", "a  b", "a   b", "a    b", "a\tb", "a\nb", "a\n\nb", "a \n b",
    "   leading", "trailing   ", "   both   ", "\n\nleading newlines", "trailing newlines\n\n",
    "mixed \t \n \r\n whitespace", " " * 17, "\t" * 9, "\n" * 11, " \t" * 6,
    "nbsp\u00a0here", "ideographic\u3000space", "em\u2003space", "line\u2028separator",
    "para\u2029separator", "thin\u2009space", "zero\u200bwidth", "nel\u0085char",
    "word" + " " * 40 + "word", "x\n" * 8, "  Hello  World  ",
]

DIGITS = [
    "0", "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
    "3.14159", "1,000,000", "1.000.000,50", "-42", "+7", "1e10", "2024-06-01", "12:34:56",
    "v1.2.3", "192.168.0.1", "+1 (555) 123-4567", "100%", "1/2 3/4", "0.000001",
    "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "１２３４５", "一二三四五", "Ⅻ", "½ ¼ ¾", "²³¹",
    "abc123def456", "123abc", "a1b2c3", "9" * 50, "007 bond", "ids 1 22 333 4444 55555",
]

SPECIAL = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<end_of_turn>",
    "<s>[INST] hi [/INST]</s>",
    "<|im_start|><|im_start|>double",
    "text<|im_end|>text",
    " <|im_end|> spaced ",
    "<|im_sta partial <|im_end| partial",
    "<think>\nreasoning\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<unk> <pad> <mask> [multimodal] <unused0> <unused99>",
    "<start_of_image> <end_of_image> <image_soft_token>",
    "<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>",
    "<|reserved_special_token_0|> <|finetune_right_pad_id|>",
    "<<|eot_id|>> <|<|im_end|>|>",
    "<|python_tag|>print(1)<|eom_id|>",
]

ODD = [
    "e\u0301 vs \u00e9",  # combining acute vs precomposed
    "a\u0300\u0301\u0302\u0303\u0304 stacked marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dalgo",
    "\ufeffBOM at start",
    "rtl \u200fmark\u200e ltr",
    "zwj\u200dzwnj\u200c",
    "\u00ad soft hyphen",
    "private \ue000\uf8ff use",
    "replacement \ufffd char",
    "variation \u2764\ufe0e \u2764\ufe0f",
    "Hangul jamo \u1100\u1161\u11a8 vs \uac01",
    "Angstrom \u212b vs \u00c5 ohm \u2126 vs \u03a9",
    "Kelvin \u212a and micro \u00b5 vs \u03bc",
    "control \x01\x02\x03\x07\x1b[0m chars",
    "delete \x7f char",
    "null \x00 byte",
    "tab\x0bvertical\x0cformfeed",
    "\U0001f600\U0001f4a9\U00010348 astral",
    "\U000e0041 tag char",
    "Ǆ ǅ ǆ title case digraphs",
    "ß ẞ ſ ﬅ special latin",
    "İı Iı turkish i",
    "ΣΑΣ σας ς final sigma",
    "ﷺ ﷽ arabic ligatures",
    "ㄱㄴㄷ compatibility jamo",
    "⁰¹²³⁴⁵⁶⁷⁸⁹ superscripts ₀₁₂ subscripts",
    "™ ® © ℗ ℠",
    "…‥․ dots",
    "\u0e01\u0e34\u0e4a thai marks",
    "a\u0308\u0304 multiple",
    "\u1e9b\u0323 long s dot",
    "Ǻǻ Ǽǽ Ǿǿ",
    "\u0041\u030a vs \u00c5",
    "クﾞ ｸﾞ グ",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "’s curly apostrophe ’re",
    "!!!???...,,,;;;:::",
    "((([[[{{{<<<>>>}}}]]])))",
    "----------------------------------------",
    "========================================",
    "________________________________________",
    "****************************************",
    "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?",
    "a" * 100,
    "ab" * 60,
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "ALLCAPSWORDWITHOUTSPACES",
    "MiXeD cAsE tExT",
]

MARKDOWN = [
    "# Title\n\n## Subtitle\n\n- item 1\n- item 2\n  - nested\n\n1. first\n2. second\n",
    "**bold** *italic* `code` ~~strike~~ [link](http://x.y) ![img](a.png)",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "```python\nprint('hi')\n```\n",
    "> quote\n>> nested quote\n",
    "Line one.\nLine two.\n\nParagraph two.",
]


def generated(rng):
    """Systematic combinations: words from many scripts joined by varied separators."""
    words = []
    for s in PROSE + EMOJI + ODD[:20]:
        words.extend(w for w in s.replace("\n", " ").split(" ") if w)
    seps = [" ", "  ", "\n", "\t", "", " \n", ", ", "\u3000", "-", "_", ". "]
    out = []
    for i in range(110):
        n = rng.randint(2, 9)
        parts = [rng.choice(words) for _ in range(n)]
        s = ""
        for k, p in enumerate(parts):
            s += p
            if k + 1 < n:
                s += rng.choice(seps)
        if i % 7 == 0:
            s = " " + s
        if i % 11 == 0:
            s += " " * rng.randint(1, 4)
        if i % 13 == 0:
            s += str(rng.randint(0, 10**rng.randint(1, 12)))
        out.append(s)
    return out


def main():
    rng = random.Random(20261129)
    strings = PROSE + CODE + EMOJI + WHITESPACE + DIGITS + SPECIAL + ODD + MARKDOWN
    strings += generated(rng)
    # Longer mixed documents.
    strings.append("\n\n".join(PROSE[:20]))
    strings.append("\n".join(CODE[:6]))
    strings.append(" ".join(EMOJI))
    seen = set()
    unique = []
    for s in strings:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    doc = {
        "description": "tokenizer test corpus: prose in many scripts, code, emoji, whitespace "
                       "runs, digit runs, special-token text, unusual Unicode",
        "generator": "tools/tokenizer/make_corpus.py (seed 20261129)",
        "strings": unique,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=True, indent=0)
        f.write("\n")
    print(f"{len(unique)} strings -> {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

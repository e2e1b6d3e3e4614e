"""Deterministic, varied strings for tokenizer parity tests and benchmarks:
many scripts, emoji and ZWJ sequences, combining marks NFC composes,
decomposed Hangul, whitespace runs, CRLF, digits, contractions in any case,
punctuation, chat special tokens inline, code, and long texts. The same seed
gives the same strings on every machine (only `random.Random` is used)."""
import random

SCRIPTS = {
    "latin": ["naïve", "café", "Ångström", "façade", "smörgåsbord", "Øresund", "straße", "Đặng",
              "Łódź", "İstanbul", "ﬁnance", "Zürich", "mañana", "œuvre", "Hello", "world",
              "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "HTTP", "camelCase",
              "snake_case", "x", "I"],
    "cyrillic": ["Привет", "мир", "Съешь", "же", "ещё", "этих", "мягких", "французских", "булок",
                 "ЁЖИК", "Україна", "ґанок", "Србија"],
    "greek": ["Καλημέρα", "κόσμε", "ΑΒΓΔ", "ἀρχή", "ῥῆμα", "λόγος", "Ωμέγα", "ς"],
    "arabic": ["مرحبا", "بالعالم", "العربية", "كِتَابٌ", "٣٤٥", "ﻻ", "فارسی", "اردو"],
    "hebrew": ["שלום", "עולם", "בְּרֵאשִׁית", "עִבְרִית", "ﬠ"],
    "devanagari": ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय", "१२३", "संस्कृतम्"],
    "thai": ["สวัสดี", "ชาวโลก", "ภาษาไทย", "กรุงเทพมหานคร", "๑๒๓"],
    "cjk": ["你好", "世界", "我们", "中华人民共和国", "漢字", "繁體中文", "，", "。", "「引用」",
            "𠀀", "𪚥", "丽", "兀"],
    "hangul": ["안녕하세요", "세계", "한국어", "훈민정음", "ㄱㄴㄷ", "뷁"],
    "kana": ["こんにちは", "カタカナ", "ひらがな", "ｶﾀｶﾅ", "ー", "ゔ", "ヴ", "東京都"],
    "other": ["ქართული", "Հայերեն", "ᚠᚢᚦ", "ꦗꦮ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ⅫⅣ", "①②", "½¾", "²³",
              "µ", "Ω", "Å", "ǅ", "ﬀ", "ŉ"],
}
EMOJI = ["😀", "🎉", "👍", "👍🏽", "👋🏿", "👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "❤️", "🇫🇷", "🇯🇵", "🇺🇸",
         "1️⃣", "#️⃣", "🧑🏻‍🤝‍🧑🏾", "😶‍🌫️", "🫠", "☃", "✈️", "🤦‍♀️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
# Base letter + combining marks that NFC composes (or reorders), and
# decomposed Hangul jamo (NFC composes them into syllables).
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "q\u0307\u0323", "A\u030a",
             "c\u0327", "u\u0308\u0301", "i\u0307", "\u1100\u1161", "\u1100\u1161\u11a8",
             "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u0915\u093c", "\u05e9\u05c1", "e\u0301\u0301",
             "\u212b", "\u2126", "\u0344", "\u0958", "z\u0335", "\u0301start"]
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r",
              " \n ", "\u00a0", "\u3000", "\u2009", "\u2028", "\u0085", "\x0b", "\x0c", "\u200b",
              "\u202f", " " * 17, "\n" * 7, " \t \n"]
DIGITS = ["0", "7", "42", "123", "2024", "1234567890", "3.14159", "1,000,000", "-12", "+1e-10",
          "٣٤٥", "१२३", "１２３", "０", "v1.2.3", "0x1F", "10%", "$99.99", "12:30"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE",
                "'VE", "'Ve", "'M", "'LL", "'Ll", "'D", "don't", "DON'T", "I'm", "I'M", "you're",
                "YOU'RE", "we've", "She'll", "he'D", "it's", "It'S", "'", "''", "'x", "'ſ", "’s"]
PUNCT = ["!", "!!", "?!", ".", "...", "…", ",", ";", ":", "—", "–", "-", "«", "»", "“", "”",
         "(", ")", "[", "]", "{", "}", "<", ">", "@", "#", "$", "%", "^", "&", "*", "/", "\\",
         "|", "~", "`", "\"", "_", "=", "+", "==>", "->", "::", "//", "/*", "*/", "<!--", "¿¡",
         "。", "、", "！", "？", "§", "©", "®", "™", "°", "±", "×", "÷", "€", "£", "¥"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|vision_pad|>", "<|im_start|>user\n",
            "<|im_start|>assistant\n", "<|im_sta", "|im_end|>", "<<|im_end|>>", "<think", "< think>",
            "<|IM_START|>", "<|im_start|><|im_end|>"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        '{"key": "value", "n": [1, 2, 3]}', "SELECT * FROM t WHERE id = 1;", "#include <vector>",
        "if x != None:\n        pass", "<div class=\"a\">Hi</div>", "$ ls -la | grep foo",
        "a_b.c-d/e\\f", "    \n    \n", "https://example.com/path?q=1&r=2#frag"]
SEPARATORS = [" ", " ", " ", "", "\n", ", ", "  ", "\t", "\r\n", "\u00a0"]


def _fragment(rng):
    kind = rng.random()
    if kind < 0.40:
        return rng.choice(SCRIPTS[rng.choice(list(SCRIPTS))])
    if kind < 0.47:
        return rng.choice(EMOJI)
    if kind < 0.54:
        return rng.choice(COMBINING)
    if kind < 0.63:
        return rng.choice(WHITESPACE)
    if kind < 0.71:
        return rng.choice(DIGITS)
    if kind < 0.79:
        return rng.choice(CONTRACTIONS)
    if kind < 0.88:
        return rng.choice(PUNCT)
    if kind < 0.93:
        return rng.choice(SPECIALS)
    if kind < 0.97:
        return rng.choice(CODE)
    # A random code point from blocks assigned long ago (Unicode <= 6).
    lo, hi = rng.choice([(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF),
                         (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B),
                         (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x22FF), (0x3040, 0x30FF),
                         (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
                         (0x1F300, 0x1F5FF)])
    return chr(rng.randint(lo, hi))


def _text(rng, n_fragments):
    parts = []
    for _ in range(n_fragments):
        parts.append(_fragment(rng))
        if rng.random() < 0.6:
            parts.append(rng.choice(SEPARATORS))
    return "".join(parts)


def strings(n=10_500, seed=20240603):
    """`n` strings: mostly short and mixed, some single fragments, some
    several-KB long texts."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.15:
            out.append(_fragment(rng))
        elif r < 0.985:
            out.append(_text(rng, rng.randint(1, 40)))
        else:
            out.append(_text(rng, rng.randint(600, 2500)))
    return out

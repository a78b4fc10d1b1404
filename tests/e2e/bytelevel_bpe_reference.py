#!/usr/bin/env python3
"""Independent reference implementation of Hugging Face `tokenizer.json` byte-level BPE.

Written from the tokenizer.json format (GPT-2 / Llama 3 style files), not from the C++ code it
is used to test. Standard library plus the `regex` module only.

Usage:
  bytelevel_bpe_reference.py train CORPUS... --vocab-size N --style gpt2|llama3 -o tokenizer.json
                                   [--max-bytes B]
  bytelevel_bpe_reference.py encode tokenizer.json FILE [--add-special-tokens]
                                                  (FILE '-' = stdin; prints ids)
  bytelevel_bpe_reference.py decode tokenizer.json ID...       (no ID = read ids from stdin)

Importable API:
  load(path) -> dict                        the parsed tokenizer.json
  encode(tok, data: bytes, add_special_tokens=False) -> list[int]
  decode(tok, ids) -> bytes
  train(corpus, vocab_size, style="gpt2", out_path=None, max_bytes=...) -> dict
  pre_tokenize(tok, text: str) -> list[str] the pre-tokens (unmapped text) of one segment

Semantics (Hugging Face `tokenizers`, normalizer null):
  * Input bytes are decoded with 'surrogateescape': each byte of invalid UTF-8 becomes a lone
    surrogate U+DC80+b (category Cs: not a letter, number, or whitespace); pieces are turned back
    into bytes with .encode('utf-8', 'surrogateescape') before the byte-level mapping.
  * Added tokens are split out first, in HF's two passes: tokens with "normalized": false over
    the whole text, then tokens with "normalized": true over the remaining gaps. In each pass the
    leftmost match wins, the longest at that position; "lstrip"/"rstrip" also take the Unicode
    White_Space before/after the match (lstrip never reaches back past the previous match).
    "single_word": true is refused (ValueError).
  * Every non-empty gap is pre-tokenized on its own: Split(Isolated) steps, then ByteLevel
    (add_prefix_space per piece, optional GPT-2 regex), then mapped with bytes_to_unicode.
  * Each pre-token: if model.ignore_merges and the mapped word is in the vocab, its id; else
    GPT-2 BPE: repeatedly merge every non-overlapping occurrence (left to right) of the adjacent
    pair with the lowest merge rank.
  * Decoding: added-token ids give their content's UTF-8; with model.byte_fallback, "<0xXX>"
    tokens give that byte; other tokens map each char back through bytes_to_unicode's inverse
    (a token with any char outside that table gives its own UTF-8, as HF's ByteLevel decoder).
  * add_special_tokens: a TemplateProcessing post-processor (alone or in a Sequence) wraps the
    ids in its "single" template: each {"SpecialToken": {"id": name}} is special_tokens[name]
    ["ids"], {"Sequence": {"id": "A"}} the text's ids. The llama3 style's template is Llama 3's,
    <|begin_of_text|> $A.
"""

import argparse
import heapq
import json
import os
import sys
import time

import regex

GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Unicode White_Space: what Rust's char::is_whitespace (HF's lstrip/rstrip) and Oniguruma's \s
# accept. Python's str.isspace() also accepts U+001C..U+001F, so it is not used.
WHITE_SPACE = frozenset(
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F,
     0x3000] + list(range(0x2000, 0x200B)))

DEFAULT_TRAIN_MAX_BYTES = 2 * 1024 * 1024


def bytes_to_unicode():
    """GPT-2's table: byte -> printable unicode char."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# bytes.translate can't map to str; a 256-entry list indexed by byte is the fast path.
_BYTE_CHARS = [BYTE_TO_CHAR[b] for b in range(256)]


def _to_bytes(text):
    return text.encode("utf-8", "surrogateescape")


def _byte_level(text):
    return "".join([_BYTE_CHARS[b] for b in _to_bytes(text)])


def _is_ws(ch):
    return ord(ch) in WHITE_SPACE


# ----------------------------------------------------------------------------------------------
# Pre-tokenization

def _split_isolated(compiled, text):
    """HF Split behavior 'Isolated': every match is a piece and every non-empty gap too."""
    out = []
    prev = 0
    for m in compiled.finditer(text):
        s, e = m.span()
        if s == e:
            continue
        if s > prev:
            out.append(text[prev:s])
        out.append(text[s:e])
        prev = e
    if prev < len(text):
        out.append(text[prev:])
    return out


def _compile_pretokenizer(spec):
    """Returns a list of steps (callables str -> list[str]); the last one is ByteLevel."""
    if spec is None:
        raise ValueError("pre_tokenizer is null: not a byte-level tokenizer")
    if spec.get("type") == "Sequence":
        items = spec.get("pretokenizers")
        if not isinstance(items, list) or not items:
            raise ValueError("Sequence pre_tokenizer without pretokenizers")
    else:
        items = [spec]
    steps = []
    for i, item in enumerate(items):
        t = item.get("type")
        if t == "ByteLevel":
            if i != len(items) - 1:
                raise ValueError("ByteLevel must be the last pre_tokenizer")
            add_prefix = bool(item.get("add_prefix_space", False))
            use_regex = bool(item.get("use_regex", True))
            gpt2 = regex.compile(GPT2_PATTERN)

            def step(text, add_prefix=add_prefix, use_regex=use_regex, gpt2=gpt2):
                if add_prefix and not text.startswith(" "):
                    text = " " + text
                return _split_isolated(gpt2, text) if use_regex else [text]
            steps.append(step)
        elif t == "Split":
            pat = item.get("pattern") or {}
            if "Regex" in pat:
                compiled = regex.compile(pat["Regex"])
            elif "String" in pat:
                compiled = regex.compile(regex.escape(pat["String"]))
            else:
                raise ValueError("Split pattern must be {'Regex': ...} or {'String': ...}")
            if item.get("behavior") != "Isolated":
                raise ValueError("Split behavior %r not supported" % item.get("behavior"))
            if item.get("invert", False):
                raise ValueError("Split invert=true not supported")
            steps.append(lambda text, c=compiled: _split_isolated(c, text))
        else:
            raise ValueError("pre_tokenizer type %r not supported" % t)
    if not steps or items[-1].get("type") != "ByteLevel":
        raise ValueError("pre_tokenizer must end with ByteLevel")
    return steps


def _run_steps(steps, text):
    pieces = [text] if text else []
    for step in steps:
        nxt = []
        for p in pieces:
            nxt.extend(q for q in step(p) if q)
        pieces = nxt
    return pieces


# ----------------------------------------------------------------------------------------------
# Loaded-tokenizer state

class _Prepared:
    def __init__(self, tok):
        if tok.get("normalizer") is not None:
            raise ValueError("normalizer %r not supported (only null)" % tok["normalizer"].get("type"))
        model = tok.get("model") or {}
        if model.get("type", "BPE") != "BPE":
            raise ValueError("model type %r is not BPE" % model.get("type"))
        if model.get("dropout") not in (None, 0, 0.0):
            raise ValueError("BPE dropout is not supported")
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            raise ValueError("continuing_subword_prefix / end_of_word_suffix not supported")
        self.vocab = dict(model.get("vocab") or {})
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self.byte_fallback = bool(model.get("byte_fallback", False))
        self.unk_token = model.get("unk_token")
        self.ranks = {}
        for rank, m in enumerate(model.get("merges") or []):
            if isinstance(m, str):
                parts = m.split(" ")
            else:
                parts = list(m)
            if len(parts) != 2:
                raise ValueError("bad merge %r" % (m,))
            a, b = parts
            if a not in self.vocab or b not in self.vocab or a + b not in self.vocab:
                raise ValueError("merge %r refers to tokens missing from the vocab" % (m,))
            self.ranks.setdefault((a, b), rank)
        self.id_to_token = {i: t for t, i in self.vocab.items()}

        self.added_by_id = {}
        passes = ([], [])  # (normalized: false, normalized: true)
        seen = set()
        for at in tok.get("added_tokens") or []:
            if at.get("single_word", False):
                raise ValueError("added token %r: single_word=true is not supported" % at["content"])
            content = at["content"]
            self.added_by_id[at["id"]] = content
            if not content or content in seen:
                continue
            seen.add(content)
            special = bool(at.get("special", False))
            normalized = bool(at.get("normalized", not special))
            passes[1 if normalized else 0].append(
                (content, at["id"], bool(at.get("lstrip", False)), bool(at.get("rstrip", False))))
        self.added_passes = []
        for entries in passes:
            if not entries:
                continue
            # Longest first in an alternation = leftmost-longest (regex tries alternatives in order).
            entries.sort(key=lambda e: (-len(e[0]), e[0]))
            pat = regex.compile("|".join(regex.escape(e[0]) for e in entries))
            info = {e[0]: e for e in entries}
            self.added_passes.append((pat, info))

        self.steps = _compile_pretokenizer(tok.get("pre_tokenizer"))
        self.cache = {}

    # -- added tokens ------------------------------------------------------------------------
    @staticmethod
    def _find_added(text, pat, info):
        """HF AddedVocabulary::find_matches: list of (id or None, piece)."""
        out = []
        start_offset = 0
        for m in pat.finditer(text):
            start, stop = m.span()
            if start < start_offset:  # swallowed by the previous token's rstrip
                continue
            _, tid, lstrip, rstrip = info[m.group(0)]
            if lstrip:
                s = start
                while s > start_offset and _is_ws(text[s - 1]):
                    s -= 1
                start = s
            if rstrip:
                while stop < len(text) and _is_ws(text[stop]):
                    stop += 1
            if start > start_offset:
                out.append((None, text[start_offset:start]))
            out.append((tid, text[start:stop]))
            start_offset = stop
        if start_offset < len(text):
            out.append((None, text[start_offset:]))
        return out

    def split_added(self, text):
        pieces = [(None, text)] if text else []
        for pat, info in self.added_passes:
            nxt = []
            for tid, piece in pieces:
                if tid is None:
                    nxt.extend(self._find_added(piece, pat, info))
                else:
                    nxt.append((tid, piece))
            pieces = nxt
        return pieces

    # -- BPE ---------------------------------------------------------------------------------
    def _symbol_ids(self, sym):
        tid = self.vocab.get(sym)
        if tid is not None:
            return [tid]
        if self.byte_fallback:
            ids = [self.vocab.get("<0x%02X>" % b) for b in sym.encode("utf-8")]
            if all(i is not None for i in ids):
                return ids
        if self.unk_token is not None and self.unk_token in self.vocab:
            return [self.vocab[self.unk_token]]
        raise ValueError("symbol %r is not in the vocab (and no byte fallback / unk)" % sym)

    def bpe(self, word):
        """word: a byte-level-mapped pre-token. Returns its ids (cached)."""
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        if self.ignore_merges and word in self.vocab:
            ids = [self.vocab[word]]
        else:
            syms = list(word)
            ranks = self.ranks
            while len(syms) > 1:
                best = None
                best_rank = None
                for pair in zip(syms, syms[1:]):
                    r = ranks.get(pair)
                    if r is not None and (best_rank is None or r < best_rank):
                        best_rank, best = r, pair
                if best is None:
                    break
                a, b = best
                merged = a + b
                out = []
                i = 0
                n = len(syms)
                while i < n:
                    if i + 1 < n and syms[i] == a and syms[i + 1] == b:
                        out.append(merged)
                        i += 2
                    else:
                        out.append(syms[i])
                        i += 1
                syms = out
            ids = []
            for s in syms:
                ids.extend(self._symbol_ids(s))
        self.cache[word] = ids
        return ids


_PREPARED = {}


def _prep(tok):
    hit = _PREPARED.get(id(tok))
    if hit is not None and hit[0] is tok:
        return hit[1]
    p = _Prepared(tok)
    _PREPARED[id(tok)] = (tok, p)  # holding tok keeps its id from being reused
    return p


# ----------------------------------------------------------------------------------------------
# Public API

def load(path):
    with open(path, "rb") as f:
        tok = json.loads(f.read().decode("utf-8"))
    _prep(tok)  # validate early
    return tok


def pre_tokenize(tok, text):
    """Pre-tokens (unmapped str pieces) of one added-token-free segment."""
    return _run_steps(_prep(tok).steps, text)


def _template(processor):
    if not processor:
        return None
    if processor.get("type") == "Sequence":
        for p in processor.get("processors", []):
            found = _template(p)
            if found:
                return found
        return None
    return processor if processor.get("type") == "TemplateProcessing" else None


def encode(tok, data, add_special_tokens=False):
    template = _template(tok.get("post_processor")) if add_special_tokens else None
    if template:
        ids = []
        for item in template["single"]:
            if "SpecialToken" in item:
                ids.extend(template["special_tokens"][item["SpecialToken"]["id"]]["ids"])
            else:
                ids.extend(encode(tok, data))
        return ids
    if isinstance(data, str):
        data = data.encode("utf-8")
    p = _prep(tok)
    text = bytes(data).decode("utf-8", "surrogateescape")
    ids = []
    for tid, piece in p.split_added(text):
        if tid is not None:
            ids.append(tid)
            continue
        for pre in _run_steps(p.steps, piece):
            ids.extend(p.bpe(_byte_level(pre)))
    return ids


def decode(tok, ids):
    p = _prep(tok)
    out = bytearray()
    for i in ids:
        i = int(i)
        if i in p.added_by_id:
            out += p.added_by_id[i].encode("utf-8")
            continue
        t = p.id_to_token.get(i)
        if t is None:
            raise ValueError("id %d is not in the vocab" % i)
        if (p.byte_fallback and len(t) == 6 and t.startswith("<0x") and t.endswith(">")
                and all(c in "0123456789ABCDEF" for c in t[3:5])):
            out.append(int(t[3:5], 16))
            continue
        try:
            out += bytes(CHAR_TO_BYTE[c] for c in t)
        except KeyError:
            out += t.encode("utf-8")
    return bytes(out)


# ----------------------------------------------------------------------------------------------
# Training

def _added_token(tid, content, special):
    return {"id": tid, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": not special, "special": special}


def _skeleton(style):
    if style == "gpt2":
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
    elif style == "llama3":
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    else:
        raise ValueError("style must be gpt2 or llama3")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": style == "llama3",
                  "vocab": {}, "merges": []},
    }


def _added_specs(style):
    if style == "gpt2":
        return [("<|endoftext|>", True)]
    return [("<|begin_of_text|>", True), ("<|end_of_text|>", True), ("<tool>", False)]


def _read_corpus(corpus, max_bytes):
    """corpus: a path, bytes, or a list of those. Returns a list of bytes chunks (one per input)."""
    if isinstance(corpus, (bytes, bytearray, str, os.PathLike)):
        corpus = [corpus]
    chunks = []
    left = max_bytes
    for c in corpus:
        if left is not None and left <= 0:
            break
        if isinstance(c, (bytes, bytearray)):
            data = bytes(c)
        else:
            with open(c, "rb") as f:
                data = f.read() if left is None else f.read(left)
        if left is not None:
            data = data[:left]
            left -= len(data)
        chunks.append(data)
    return chunks


def _learn_merges(word_counts, n_merges):
    """Greedy BPE: each round merges the most frequent adjacent pair (ties: the lexicographically
    smallest (left, right) pair of strings). Returns the list of (a, b) merges."""
    words = []
    freqs = []
    for w, c in word_counts.items():
        if len(w) > 1:
            words.append(list(w))
            freqs.append(c)
    counts = {}
    where = {}
    for idx, syms in enumerate(words):
        f = freqs[idx]
        for pair in zip(syms, syms[1:]):
            counts[pair] = counts.get(pair, 0) + f
            s = where.get(pair)
            if s is None:
                where[pair] = s = set()
            s.add(idx)
    heap = [(-c, pair) for pair, c in counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        a, b = pair
        merged = a + b
        merges.append(pair)
        changed = set()
        for idx in where.pop(pair, ()):
            syms = words[idx]
            f = freqs[idx]
            if len(syms) < 2:
                continue
            out = []
            i = 0
            n = len(syms)
            hit = False
            while i < n:
                if i + 1 < n and syms[i] == a and syms[i + 1] == b:
                    out.append(merged)
                    i += 2
                    hit = True
                else:
                    out.append(syms[i])
                    i += 1
            if not hit:
                continue
            for p2 in zip(syms, syms[1:]):
                counts[p2] -= f
                changed.add(p2)
            for p2 in zip(out, out[1:]):
                counts[p2] = counts.get(p2, 0) + f
                changed.add(p2)
                s = where.get(p2)
                if s is None:
                    where[p2] = s = set()
                s.add(idx)
            words[idx] = out
        counts.pop(pair, None)
        for p2 in changed:
            c = counts.get(p2, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p2))
            elif p2 in counts:
                del counts[p2]
    return merges


def train(corpus, vocab_size, style="gpt2", out_path=None, max_bytes=DEFAULT_TRAIN_MAX_BYTES):
    """Trains a byte-level BPE; returns the tokenizer.json dict (and writes it if out_path)."""
    if vocab_size < 256:
        raise ValueError("vocab_size must be >= 256")
    tok = _skeleton(style)
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    tok["model"]["vocab"] = vocab
    specs = _added_specs(style)
    # Provisional added tokens (ids fixed after training) so that training splits them out too.
    tok["added_tokens"] = [_added_token(10 ** 9 + i, c, s) for i, (c, s) in enumerate(specs)]
    p = _Prepared(tok)

    word_counts = {}
    for data in _read_corpus(corpus, max_bytes):
        text = data.decode("utf-8", "surrogateescape")
        for tid, piece in p.split_added(text):
            if tid is not None:
                continue
            for pre in _run_steps(p.steps, piece):
                w = _byte_level(pre)
                word_counts[w] = word_counts.get(w, 0) + 1

    merges = []
    # A merge can yield a string already in the vocab ("a"+"bc" after "ab"+"c"); keep learning
    # until the vocab itself reaches vocab_size.
    while len(vocab) < vocab_size:
        need = vocab_size - len(vocab)
        new = _learn_merges(word_counts, len(merges) + need)[len(merges):]
        if not new:
            break
        for a, b in new:
            merges.append((a, b))
            if a + b not in vocab:
                vocab[a + b] = len(vocab)
            if len(vocab) >= vocab_size:
                break

    if style == "gpt2":
        tok["model"]["merges"] = ["%s %s" % m for m in merges]
    else:
        tok["model"]["merges"] = [[a, b] for a, b in merges]
    base = len(vocab)
    tok["added_tokens"] = [_added_token(base + i, c, s) for i, (c, s) in enumerate(specs)]
    if style == "llama3":  # Llama 3's: <|begin_of_text|> before a text, and before each of a pair
        bos = "<|begin_of_text|>"
        special = {"SpecialToken": {"id": bos, "type_id": 0}}
        tok["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [special, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [base], "tokens": [bos]}}}]}
    if out_path is not None:
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=2)
            f.write("\n")
        if style == "llama3":
            cfg = os.path.join(os.path.dirname(os.path.abspath(out_path)), "tokenizer_config.json")
            with open(cfg, "w", encoding="utf-8") as f:
                json.dump({"eos_token": "<|end_of_text|>", "bos_token": "<|begin_of_text|>"}, f,
                          indent=2)
                f.write("\n")
    return tok


# ----------------------------------------------------------------------------------------------
# CLI

def _main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a byte-level BPE and write tokenizer.json")
    t.add_argument("corpus", nargs="+")
    t.add_argument("--vocab-size", type=int, required=True)
    t.add_argument("--style", choices=["gpt2", "llama3"], default="gpt2")
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--max-bytes", type=int, default=DEFAULT_TRAIN_MAX_BYTES,
                   help="train on at most this many corpus bytes (0 = all; default 2 MiB)")
    e = sub.add_parser("encode", help="print the ids of FILE's bytes")
    e.add_argument("tokenizer")
    e.add_argument("file")
    e.add_argument("--add-special-tokens", action="store_true",
                   help="wrap the ids in the post-processor's template")
    d = sub.add_parser("decode", help="write the bytes of IDs to stdout")
    d.add_argument("tokenizer")
    d.add_argument("ids", nargs="*")
    args = ap.parse_args(argv)

    if args.cmd == "train":
        t0 = time.time()
        tok = train(args.corpus, args.vocab_size, args.style, args.output,
                    max_bytes=args.max_bytes or None)
        print("[bpe-ref] %s: vocab %d + %d added, %d merges, %.2fs"
              % (args.output, len(tok["model"]["vocab"]), len(tok["added_tokens"]),
                 len(tok["model"]["merges"]), time.time() - t0), file=sys.stderr)
    elif args.cmd == "encode":
        tok = load(args.tokenizer)
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
        print(" ".join(str(i) for i in encode(tok, data, args.add_special_tokens)))
    else:
        tok = load(args.tokenizer)
        raw = args.ids if args.ids else [sys.stdin.read()]
        ids = [int(x) for a in raw for x in a.replace(",", " ").split()]
        sys.stdout.buffer.write(decode(tok, ids))
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main())

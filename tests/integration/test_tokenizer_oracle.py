"""minfer's tokenizers against Hugging Face's, both loading the same GGUF file.

The oracle is transformers' own GGUF tokenizer builder (`get_gguf_tokenizer` +
`convert_gguf_tokenizer`, what `AutoTokenizer.from_pretrained(dir, gguf_file=...)`
runs) and the `tokenizers` library. transformers 5 imports torch in its GGUF
file reader, so we give the builder the metadata through gguf-py instead (the
only part we replace: the tokenizer is built and run by HF's code).

HF matches special-token texts in the input always, so minfer runs with
--parse-special. Where HF's GGUF conversion and llama.cpp (which minfer
follows) disagree, the test says why and checks the explanation instead of
skipping the case: see the `known_*` fix-ups below.
"""
import json
import subprocess
import sys
import types

import pytest

from conftest import ROOT, SHARED, minfer_bin

gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

CORPUS = ROOT / "tests" / "integration" / "data" / "tokenizer_corpus.txt"
VOCAB = SHARED / "vocab"


def read_gguf_metadata(path, string_arrays=()):
    """What transformers' torch-importing reader returns: (metadata, tensor names)."""
    reader = gguf.GGUFReader(str(path))
    metadata = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    return metadata, tuple(t.name for t in reader.tensors)


def hf_builder():
    reader = types.ModuleType("transformers.integrations.gguf.reader")
    reader.read_gguf_metadata = read_gguf_metadata
    sys.modules.setdefault("transformers.integrations.gguf.reader", reader)
    from transformers.integrations.gguf import gguf_tokenizer_mapping

    return gguf_tokenizer_mapping


def hf_tokenizer(path):
    m = hf_builder()
    architecture, tokenizer_dict, config = m.get_gguf_tokenizer(str(path))
    backend, _ = m.convert_gguf_tokenizer(architecture, tokenizer_dict)
    tokenizer_dict["architecture"] = architecture
    return backend, tokenizer_dict, config


def corpus():
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line and not line.startswith("#")]


def minfer_ids(path, texts, *flags):
    proc = subprocess.run([minfer_bin(), "tokenize", str(path), "--batch", *flags],
                          input="".join(json.dumps(t) + "\n" for t in texts),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
    assert len(out) == len(texts)
    return out


def add_back_user_defined(backend, tokenizer_dict):
    """transformers adds a GGUF's user-defined tokens only if their text is in
    the (byte-alphabet respelled) vocabulary, so GPT-NeoX's runs of spaces
    ("  ", stored as real spaces) are dropped and get BPE-merged instead. The
    model's own tokenizer.json has them as added tokens, matched whole, as
    llama.cpp does. Returns {id HF gave the re-added token: GGUF id}."""
    remap = {}
    for gguf_id, (text, token_type) in enumerate(zip(tokenizer_dict["tokens"], tokenizer_dict["token_type"])):
        if token_type == 4 and backend.token_to_id(text) is None:
            backend.add_tokens([tokenizers.AddedToken(text, normalized=False, special=False)])
            remap[backend.token_to_id(text)] = gguf_id
    return remap


def patched_gguf(src, dst, **strings):
    """A copy of a vocab-only GGUF with some string keys replaced."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in strings:
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), field.types[0])
    for key, value in strings.items():
        writer.add_string(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return dst


def compare(path, hf_encode, texts, report):
    got = minfer_ids(path, texts, "--no-bos", "--parse-special")
    bad = []
    for text, ids in zip(texts, got):
        want = hf_encode(text)
        if ids != want:
            bad.append(f"{text!r}\n  minfer {ids}\n  hf     {want}")
    report(f"{path.name}: {len(texts) - len(bad)}/{len(texts)} corpus strings match HF")
    return bad


@pytest.fixture
def report(capsys):
    def say(line):
        with capsys.disabled():
            print("\n  " + line, end="")
    return say


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is missing (scripts/get-model.sh fetches the models)")
    return path


def test_smollm2_matches_hf(report):
    """SmolLM2 (byte-level BPE, pre = smollm). Its tokenizer.json splits every
    digit first (Digits(individual_digits=True), then ByteLevel), as llama.cpp's
    smollm regexes do; transformers' GGUF builder knows no smollm split and uses
    GPT-2's, which keeps " 1" together. The oracle gets the model's own split."""
    path = need(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    backend, _, config = hf_tokenizer(path)
    texts = corpus()
    unfixed = compare(path, lambda t: backend.encode(t, add_special_tokens=False).ids, texts, lambda _: None)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    bad = compare(path, lambda t: backend.encode(t, add_special_tokens=False).ids, texts, report)
    report(f"  (with transformers' GGUF split unchanged: {len(texts) - len(unfixed)}/{len(texts)})")
    assert not bad, "\n".join(bad)
    # BOS: the file says add_bos_token = false, and so does HF's reading of it.
    assert config.get("add_bos_token") is False
    assert minfer_ids(path, ["Hello"])[0] == minfer_ids(path, ["Hello"], "--no-bos")[0]


def test_gemma3_matches_hf(report):
    """Gemma 3 (SentencePiece, 262,144 pieces, add_space_prefix = false,
    user-defined pieces like runs of spaces and HTML tags)."""
    path = need(ROOT / "models" / "gemma-3-270m-q4_k_m.gguf")
    backend, tokenizer_dict, config = hf_tokenizer(path)
    bad = compare(path, lambda t: backend.encode(t, add_special_tokens=False).ids, corpus(), report)
    assert not bad, "\n".join(bad)
    assert config["add_bos_token"] is True
    bos = tokenizer_dict["tokens"].index(config["bos_token"])
    for text in ["Hello", "", "<start_of_turn>user"]:
        with_bos, without = minfer_ids(path, [text]), minfer_ids(path, [text], "--no-bos")
        assert with_bos[0] == [bos] + without[0]


def test_baichuan_matches_hf(report):
    """Baichuan (SentencePiece with add_space_prefix). sentencepiece and
    llama.cpp always put the dummy-prefix "▁" in front of the text (and after
    every special token); HF's Metaspace only when the text does not already
    start with a space, and not after special tokens. Giving HF " " + text
    makes it always-prepend, so plain texts compare exactly; texts with special
    tokens differ by the "▁" llama.cpp adds after each one."""
    path = need(VOCAB / "ggml-vocab-baichuan.gguf")
    backend, tokenizer_dict, _ = hf_tokenizer(path)
    specials = [t for t, k in zip(tokenizer_dict["tokens"], tokenizer_dict["token_type"]) if k == 3]
    texts = corpus()
    plain = [t for t in texts if not any(s in t for s in specials)]
    assert len(plain) >= len(texts) - 5
    bad = compare(path, lambda t: backend.encode(" " + t, add_special_tokens=False).ids if t else [], plain, report)
    assert not bad, "\n".join(bad)
    # And the difference itself, on a text with special tokens.
    space = backend.token_to_id("\u2581")
    ids = minfer_ids(path, ["<s>[INST] hi</s>"], "--no-bos", "--parse-special")[0]
    assert ids[0] == 1 and ids[-1] == 2
    assert ids[1:-1] == backend.encode(" [INST] hi", add_special_tokens=False).ids
    assert backend.encode("<s>[INST] hi</s>", add_special_tokens=False).ids[1] != space


def test_gpt_neox_matches_hf(report, tmp_path):
    """GPT-NeoX's vocab file names no pre-tokenizer. llama.cpp (and minfer)
    then use their 'default' regexes, which split punctuation and digit runs
    differently from GPT-NeoX's real GPT-2 split: that is the known difference,
    counted here. With tokenizer.ggml.pre = gpt-2 written in, minfer matches HF
    exactly (with the user-defined space runs HF's builder drops added back)."""
    original = need(VOCAB / "ggml-vocab-gpt-neox.gguf")
    backend, tokenizer_dict, _ = hf_tokenizer(original)
    remap = add_back_user_defined(backend, tokenizer_dict)
    assert remap, "expected user-defined tokens that transformers' builder drops"

    def hf(text):
        return [remap.get(i, i) for i in backend.encode(text, add_special_tokens=False).ids]

    texts = corpus()
    as_file_says = compare(original, hf, texts, lambda _: None)
    patched = patched_gguf(original, tmp_path / "gpt-neox-gpt2-pre.gguf", **{"tokenizer.ggml.pre": "gpt-2"})
    bad = compare(patched, hf, texts, report)
    report(f"  (without a pre-tokenizer name, llama.cpp's default split: "
           f"{len(texts) - len(as_file_says)}/{len(texts)} match HF)")
    assert not bad, "\n".join(bad)
    assert as_file_says, "the default split was expected to differ from GPT-2's somewhere"


@pytest.mark.parametrize("name", ["gpt-2", "starcoder", "falcon", "mpt", "refact", "deepseek-coder", "deepseek-llm",
                                  "llama-spm", "phi-3"])
def test_vocabs_with_llama_cpp_pairs_also_against_hf(name, report):
    """The vocabularies llama.cpp's pairs cover, on our corpus too. Differences
    HF's GGUF builder is known to have are listed (not hidden) when it has them."""
    path = need(VOCAB / f"ggml-vocab-{name}.gguf")
    backend, tokenizer_dict, _ = hf_tokenizer(path)
    model = tokenizer_dict["tokenizer_type"]
    texts = corpus()
    if model == "llama" and tokenizer_dict["architecture"] != "phi3":  # see test_baichuan_matches_hf
        specials = [t for t, k in zip(tokenizer_dict["tokens"], tokenizer_dict["token_type"]) if k in (2, 3, 4)]
        texts = [t for t in texts if not any(s in t for s in specials)]
        bad = compare(path, lambda t: backend.encode(" " + t, add_special_tokens=False).ids if t else [], texts,
                      report)
    else:
        # HF's Phi-3 builder prepends "▁" always, like sentencepiece (no fix-up needed).
        remap = add_back_user_defined(backend, tokenizer_dict) if model == "gpt2" else {}
        bad = compare(path, lambda t: [remap.get(i, i) for i in backend.encode(t, add_special_tokens=False).ids],
                      texts, report)
    if bad:
        report(f"  differs from HF on {len(bad)}: " + "; ".join(b.splitlines()[0][:40] for b in bad))
    # transformers has a split regex only for some pre-tokenizer names (llama3,
    # qwen2, ...); for the others it falls back to GPT-2's, which is exact only
    # where the file's pre-tokenizer is GPT-2's.
    if model == "llama" or tokenizer_dict.get("pre_tokenizer_type") in ("gpt-2", "mpt"):
        assert not bad, "\n".join(bad)

// Byte-level BPE and WordPiece tokenizers, the pre-tokenizer regexes, special
// tokens, and what every tokenizer must survive (random bytes, streaming).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/text/pretokenizer.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode_text.h"
#include "engine/text/wordpiece_tokenizer.h"
#include "tokenizer_test_util.h"

using namespace minfer;
using namespace minfer::tokenizer_test;

namespace {

// Feeds ids one at a time; each piece of output must be whole characters.
std::string stream(const Tokenizer& tok, std::span<const int32_t> ids, std::vector<int32_t> context = {}) {
    IncrementalDetokenizer detok(tok, std::move(context));
    std::string text;
    for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        CHECK_MESSAGE(unicode::is_valid_utf8(piece), "push(" << id << ") returned part of a character");
        CHECK_MESSAGE(piece.find(unicode::kReplacementChar) == std::string::npos, "push(" << id << ") returned U+FFFD");
        text += piece;
    }
    return text + detok.flush();
}

const std::vector<std::string> kByteLevelVocabs = {"gpt-2", "falcon", "starcoder", "deepseek-llm", "deepseek-coder",
                                                   "mpt", "refact", "gpt-neox"};

}  // namespace

TEST_CASE("byte-level BPE: gpt-2 vocabulary, every llama.cpp case") { check_vocab_cases("gpt-2"); }
TEST_CASE("byte-level BPE: falcon vocabulary, every llama.cpp case") { check_vocab_cases("falcon"); }
TEST_CASE("byte-level BPE: starcoder vocabulary, every llama.cpp case") { check_vocab_cases("starcoder"); }
TEST_CASE("byte-level BPE: deepseek-llm vocabulary, every llama.cpp case") { check_vocab_cases("deepseek-llm"); }
TEST_CASE("byte-level BPE: deepseek-coder vocabulary, every llama.cpp case") { check_vocab_cases("deepseek-coder"); }
TEST_CASE("byte-level BPE: mpt vocabulary, every llama.cpp case") { check_vocab_cases("mpt"); }
TEST_CASE("byte-level BPE: refact vocabulary, every llama.cpp case") { check_vocab_cases("refact"); }
TEST_CASE("WordPiece: bert-bge vocabulary, every llama.cpp case") { check_vocab_cases("bert-bge"); }

TEST_CASE("byte-level BPE decodes the llama.cpp cases back to their text") {
    for (const std::string& name : {"gpt-2", "falcon", "starcoder", "deepseek-llm", "deepseek-coder", "mpt", "refact"}) {
        const auto tok = load(kVocab + name + ".gguf");
        for (const auto& c : read_vocab_cases(kVocab + name + ".gguf")) {
            CHECK_MESSAGE(tok->decode(c.ids) == c.text, name << ": \"" << c.text << "\"");
            CHECK(tok->decode(tok->encode(c.text, true)) == c.text);
        }
    }
}

TEST_CASE("pre-tokenizer regexes: llama.cpp's splits") {
    const auto split = [](std::string_view pre, std::string_view text) {
        const RegexSplitter s(bpe_preset(pre).regexes);
        std::vector<std::string> out;
        for (auto p : s.split(text)) out.emplace_back(p);
        return out;
    };
    using V = std::vector<std::string>;
    // GPT-2: contractions, a space glued to the word after it, runs of spaces
    // leave their last one to the next word.
    CHECK(split("gpt-2", "I'm  fine, 123!") == V{"I", "'m", " ", " fine", ",", " 123", "!"});
    CHECK(split("gpt-2", "a\n\nb  ") == V{"a", "\n", "\n", "b", "  "});
    // Llama 3: digits in groups of three, case-insensitive contractions,
    // newlines kept with the whitespace before them.
    CHECK(split("llama-bpe", "12345 DON'T") == V{"123", "45", " DON", "'T"});
    CHECK(split("llama3", "x  \n\ny") == V{"x", "  \n\n", "y"});
    // StarCoder / SmolLM: every digit on its own first.
    CHECK(split("smollm", "ab 2024") == V{"ab", " ", "2", "0", "2", "4"});
    // Qwen2: single digits, no separate space.
    CHECK(split("qwen2", "v12") == V{"v", "1", "2"});
    // No name: llama.cpp's default (punctuation runs first).
    CHECK(split("", "don't") == V{"don", "'", "t"});
    // deepseek-llm's \s+$ is the end of the piece, not before a final newline.
    CHECK(split("deepseek-llm", "ab  ") == V{"ab", "  "});
    // U+0085 (NEXT LINE) is whitespace to llama.cpp's \s, not to PCRE2's.
    CHECK(split("gpt-2", "a\xC2\x85\xC2\x85" "b") == V{"a", "\xC2\x85", "\xC2\x85", "b"});
    CHECK(translate_regex_for_pcre2(R"(\s+(?!\S)|[^\s\p{L}])") == R"([\s\x{85}]+(?![^\s\x{85}])|[^\s\x{85}\p{L}])");
    CHECK(split("gpt-2", "").empty());
    CHECK_THROWS_WITH_AS(bpe_preset("no-such-pre"), "pre-tokenizer 'no-such-pre' (tokenizer.ggml.pre) is not supported",
                         TokenizerError);
}

TEST_CASE("special tokens: control ones only with parse_special, user-defined ones always") {
    // gpt-2: <|endoftext|> (50256) is a control token.
    const auto gpt2 = load(kVocab + "gpt-2.gguf");
    const std::string text = "a<|endoftext|>b";
    CHECK(gpt2->encode(text, false, true) == std::vector<int32_t>{64, 50256, 65});
    CHECK(gpt2->encode(text, false, false).size() > 3);
    CHECK(gpt2->decode(gpt2->encode(text, false, false)) == text);
    CHECK(gpt2->decode(gpt2->encode(text, false, true)) == "ab");  // control tokens make no text
    CHECK(gpt2->token_to_piece(50256) == "<|endoftext|>");
    CHECK(gpt2->end_of_generation_ids() == std::vector<int32_t>{50256});

    // GPT-NeoX: runs of spaces are user-defined tokens, matched whole, longest first.
    const auto neox = load(kVocab + "gpt-neox.gguf");
    CHECK(neox->piece(50276) == "  ");
    CHECK(neox->token_type(50276) == TokenType::UserDefined);
    const std::vector<int32_t> ids = neox->encode("x     y", false);  // five spaces: one token
    REQUIRE(ids.size() == 3);
    CHECK(neox->piece(ids[1]) == "     ");
    CHECK(neox->decode(ids) == "x     y");

    // Longest first beats leftmost: "<a><ab>" style overlaps resolve as llama.cpp does.
    SpecialTokenSplitter splitter({{7, "<x>", false}, {8, "x><y", true}});
    const auto frags = splitter.split("a<x><y>", true);
    REQUIRE(frags.size() == 3);
    CHECK(frags[0].text == "a<");
    CHECK(frags[1].id == 8);
    CHECK(frags[2].text == ">");
    CHECK(splitter.split("a<x>", false).size() == 1);  // control-like entries need parse_special
}

TEST_CASE("SmolLM2: chat template tokens, BOS flag, end of generation") {
    const auto tok = load_model_or_skip("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!tok) return;
    CHECK(tok->bos_id() == 1);
    CHECK(tok->eos_id() == 2);
    CHECK(tok->token_to_piece(1) == "<|im_start|>");
    // EOS <|im_end|>, then <|endoftext|> recognised by its text.
    CHECK(tok->end_of_generation_ids() == std::vector<int32_t>{2, 0});
    // add_bos_token = false in the file.
    CHECK(tok->encode("Hello", true) == tok->encode("Hello", false));
    const std::vector<int32_t> chat = tok->encode("<|im_start|>user\nHi<|im_end|>\n", false, true);
    REQUIRE(chat.size() >= 4);
    CHECK(chat.front() == 1);
    CHECK(std::count(chat.begin(), chat.end(), 2) == 1);
    CHECK(tok->encode("<|im_start|>", false, false) != std::vector<int32_t>{1});
    CHECK(tok->decode(tok->encode("2024: 12 cats", false)) == "2024: 12 cats");
}

TEST_CASE("Gemma 3: SentencePiece without the space prefix, user-defined pieces") {
    const auto tok = load_model_or_skip("gemma-3-270m-q4_k_m.gguf");
    if (!tok) return;
    CHECK(tok->vocab_size() == 262144);
    CHECK(tok->bos_id() == 2);
    const std::vector<int32_t> hello = tok->encode("Hello", true);
    REQUIRE(hello.size() == 2);
    CHECK(hello[0] == 2);
    CHECK(tok->piece(hello[1]) == "Hello");  // no "▁": add_space_prefix = false
    for (const std::string text : {" Hello  world", "  two leading", "\n\ttabs\n\n", "Zoë 🦙 中文"}) {
        CHECK(tok->decode(tok->encode(text, true)) == text);
    }
    const std::vector<int32_t> turn = tok->encode("<start_of_turn>user\nhi<end_of_turn>", false, true);
    REQUIRE(!turn.empty());
    CHECK(tok->token_to_piece(turn.front()) == "<start_of_turn>");
    const auto& eog = tok->end_of_generation_ids();
    CHECK(eog.front() == 1);  // <eos>
    CHECK(std::count(eog.begin(), eog.end(), turn.back()) == 1);  // <end_of_turn>
}

TEST_CASE("WordPiece: BERT normalisation and whole-word unknowns") {
    using V = std::vector<std::string>;
    CHECK(WordPieceTokenizer::split_words("Hello, World!") == V{"hello", ",", "world", "!"});
    CHECK(WordPieceTokenizer::split_words("Führer Cửa") == V{"fuhrer", "cua"});
    CHECK(WordPieceTokenizer::split_words("我想apple") == V{"我", "想", "apple"});
    CHECK(WordPieceTokenizer::split_words(" \t\n").empty());
    const auto tok = load(kVocab + "bert-bge.gguf");
    CHECK(tok->encode("hello world", true) == std::vector<int32_t>{101, 7592, 2088, 102});  // [CLS] ... [SEP]
    // Each word piece keeps its space: no clean-up of " !" (HF's clean_up_tokenization_spaces).
    CHECK(tok->decode(std::vector<int32_t>{101, 7592, 2088, 999, 102}) == "hello world !");
    CHECK(tok->encode("កាន់", false) == std::vector<int32_t>{100});  // [UNK] for the whole word
}

TEST_CASE("IncrementalDetokenizer: byte-level BPE never emits half a character") {
    const auto tok = load(kVocab + "gpt-2.gguf");
    const std::string text = "Zoë ate 🦙 crêpes: «ça», нещо, 中文字符 ✅ and 😶‍🌫️ 👨‍👩‍👧‍👦.";
    const std::vector<int32_t> ids = tok->encode(text, false);
    // Several tokens here hold only part of a character (GPT-2 has few CJK/emoji tokens).
    int partial = 0;
    for (int32_t id : ids) partial += !unicode::is_valid_utf8(tok->token_to_piece(id));
    CHECK(partial > 5);
    CHECK(stream(*tok, ids) == text);
    for (size_t cut = 0; cut <= ids.size(); ++cut) {
        const std::vector<int32_t> context(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
        std::string head = tok->decode(context);
        while (head.ends_with(unicode::kReplacementChar)) head.resize(head.size() - unicode::kReplacementChar.size());
        CHECK(head + stream(*tok, std::span(ids).subspan(cut), context) == text);
    }
}

TEST_CASE("robustness: random bytes never crash any tokenizer; byte-level BPE round-trips valid UTF-8") {
    std::vector<std::string> paths;
    for (const std::string name : {"llama-spm", "phi-3", "baichuan", "bert-bge", "gpt-2", "falcon", "starcoder",
                                   "deepseek-llm", "deepseek-coder", "mpt", "refact", "gpt-neox"})
        paths.push_back(kVocab + name + ".gguf");
    paths.push_back(kSource + "/models/stories260K.gguf");
    paths.push_back(kSource + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");

    std::mt19937 rng(1234);
    const std::vector<std::string> alphabet = {"a", "Z", " ", "  ", "\n", "\t", "\r\n", "7", "'s", ".", "é", "ü",
                                               "中", "😶", "\xE2\x80\x8D", "🌫️", "<|endoftext|>", "<s>", "\xC2\x85"};
    for (const std::string& path : paths) {
        if (!exists(path)) {
            MESSAGE("SKIPPED: " << path << " is missing");
            continue;
        }
        const auto tok = load(path);
        const bool byte_level = GGUFFile::open(path).get_string("tokenizer.ggml.model") == "gpt2";
        int round_trips = 0;
        for (int trial = 0; trial < 200; ++trial) {
            std::string bytes(rng() % 64, '\0');
            for (char& c : bytes) c = static_cast<char>(rng());
            for (bool special : {false, true}) {
                std::vector<int32_t> ids;
                CHECK_NOTHROW(ids = tok->encode(bytes, special, special));
                for (int32_t id : ids) REQUIRE((id >= 0 && id < tok->vocab_size()));
                CHECK(unicode::is_valid_utf8(tok->decode(ids)));
            }
            std::string text;
            for (size_t k = rng() % 24; k > 0; --k) text += alphabet[rng() % alphabet.size()];
            if (byte_level) {
                const std::string back = tok->decode(tok->encode(text, true));
                round_trips += back == text;
                CHECK_MESSAGE(back == text, path << ": \"" << text << "\"");
            }
        }
        if (byte_level) MESSAGE(path << ": " << round_trips << "/200 random texts round-trip");
    }
}

TEST_CASE("performance: 1 MB of English with the gpt-2 vocabulary") {
    const auto tok = load(kVocab + "gpt-2.gguf");
    const std::vector<std::string> words = {"the", "of", "and", "to", "in", "tokenizer", "engine", "inference",
                                            "model's", "quickly", "brown", "fox", "jumped", "over", "1984",
                                            "lazy", "dogs", "while", "Reading", "unbelievable", "co-operation"};
    std::mt19937 rng(7);
    std::string text;
    while (text.size() < (1u << 20)) {
        text += words[rng() % words.size()];
        text += rng() % 12 == 0 ? ".\n" : rng() % 7 == 0 ? ", " : " ";
    }
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->encode(text, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("gpt-2: encoded " << text.size() << " bytes into " << ids.size() << " tokens in " << seconds << " s");
    CHECK(tok->decode(ids) == text);
    // Not a speed test (the time is printed above; about 0.3 s here): a bound
    // that only a pathological, superlinear encoder misses, also under the
    // sanitizers and a busy machine.
    CHECK(seconds < 20.0);
}

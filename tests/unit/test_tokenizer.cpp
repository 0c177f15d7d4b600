#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/text/sentencepiece_tokenizer.h"
#include "engine/text/tokenizer.h"
#include "tokenizer_test_util.h"

using namespace minfer;
using namespace minfer::tokenizer_test;

namespace {

bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<uint8_t>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

struct Generation {
    std::string prompt;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> generated_ids;
    std::string text;
};

std::vector<Generation> read_reference_generations() {
    const auto doc = boost::json::parse(read_file(kShared + "/reference/stories260K/run_c_greedy.json"));
    std::vector<Generation> out;
    for (const auto& v : doc.as_array()) {
        const auto& o = v.as_object();
        Generation g;
        g.prompt = std::string(o.at("prompt").as_string());
        for (const auto& id : o.at("prompt_ids").as_array()) g.prompt_ids.push_back(static_cast<int32_t>(id.to_number<int64_t>()));
        for (const auto& id : o.at("generated_ids").as_array()) g.generated_ids.push_back(static_cast<int32_t>(id.to_number<int64_t>()));
        g.text = std::string(o.at("text").as_string());
        out.push_back(std::move(g));
    }
    REQUIRE(!out.empty());
    return out;
}

// Feeds ids one at a time; checks each piece of output is whole characters.
std::string detokenize_stream(const Tokenizer& tok, std::span<const int32_t> ids, std::vector<int32_t> context = {}) {
    IncrementalDetokenizer detok(tok, std::move(context));
    std::string text;
    for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        CHECK_MESSAGE(is_valid_utf8(piece), "push(" << id << ") returned part of a character");
        CHECK_MESSAGE(piece.find("\xEF\xBF\xBD") == std::string::npos, "push(" << id << ") returned U+FFFD");
        text += piece;
    }
    text += detok.flush();
    return text;
}

}  // namespace

TEST_CASE("llama SPM vocabulary: every llama.cpp test case") {
    check_vocab_cases("llama-spm");
}

TEST_CASE("Phi-3 vocabulary (SPM, <unk> typed control, padding typed unknown): every llama.cpp test case") {
    const auto tok = check_vocab_cases("phi-3");
    CHECK(tok->eos_id() == 32000);
    // EOS, then <|end|> (32007), which llama.cpp recognises by its text: Phi-3's chat turns end with it.
    CHECK(tok->end_of_generation_ids() == std::vector<int32_t>{32000, 32007});
}

TEST_CASE("a llama vocabulary is BPE by piece score, not unigram") {
    // The reason the model proto says BPE: unigram's best-score segmentation
    // disagrees with llama.cpp (and Meta's tokenizer.model) on many cases.
    const std::string path = kShared + "/vocab/ggml-vocab-llama-spm.gguf";
    const GGUFFile file = GGUFFile::open(path);
    const GgufVocab vocab = GgufVocab::from_gguf(file);
    const auto cases = read_vocab_cases(path);
    const SentencePieceTokenizer bpe(vocab, spm::ModelType::BPE);
    const SentencePieceTokenizer unigram(vocab, spm::ModelType::Unigram);
    CHECK(count_passing(bpe, cases, false) == 46);
    CHECK(count_passing(unigram, cases, false) < 46);
}

TEST_CASE("stories260K encodes the reference prompts as llama2.c run.c does") {
    const auto tok = load(kSource + "/models/stories260K.gguf");
    CHECK(tok->vocab_size() == 512);
    CHECK(tok->bos_id() == 1);
    CHECK(tok->eos_id() == 2);
    CHECK(tok->end_of_generation_ids() == std::vector<int32_t>{2});
    int checked = 0;
    for (const auto& g : read_reference_generations()) {
        CHECK_MESSAGE(tok->encode(g.prompt, true) == g.prompt_ids, "prompt \"" << g.prompt << "\"");
        ++checked;
    }
    MESSAGE("stories260K: " << checked << " reference prompts checked");
    CHECK(tok->encode("", true) == std::vector<int32_t>{1});
    CHECK(tok->encode("", false).empty());
}

TEST_CASE("decode: reference generations give run.c's text") {
    const auto tok = load(kSource + "/models/stories260K.gguf");
    for (const auto& g : read_reference_generations()) {
        std::vector<int32_t> ids = g.prompt_ids;
        ids.insert(ids.end(), g.generated_ids.begin(), g.generated_ids.end());
        // run.c stops when it samples BOS, prints nothing for it, and ends with a newline.
        if (ids.back() == 1) ids.pop_back();
        CHECK(tok->decode(ids) + "\n" == g.text);
    }
}

TEST_CASE("decode: round trips, byte tokens, control tokens, the leading space") {
    const std::string path = kShared + "/vocab/ggml-vocab-llama-spm.gguf";
    const auto tok = load(path);
    for (const auto& c : read_vocab_cases(path)) {
        CHECK(tok->decode(c.ids) == c.text);
        CHECK(tok->decode(tok->encode(c.text, true)) == c.text);
    }
    // 15043 "▁Hello", 3186 "▁world", 29871 "▁"; 243 162 169 156 are the bytes of 🦙.
    CHECK(tok->decode(std::vector<int32_t>{15043}) == "Hello");
    CHECK(tok->decode(std::vector<int32_t>{1, 15043, 3186, 2}) == "Hello world");
    CHECK(tok->decode(std::vector<int32_t>{3186, 15043}) == "world Hello");
    CHECK(tok->decode(std::vector<int32_t>{29871, 15043}) == " Hello");  // only one space is the dummy prefix
    CHECK(tok->decode(std::vector<int32_t>{29871, 243, 162, 169, 156}) == "🦙");
    CHECK(tok->decode(std::vector<int32_t>{15043, 29871, 243, 162, 169, 156}) == "Hello 🦙");
    CHECK(tok->piece(243) == "<0xF0>");
    // Bytes that are not UTF-8: one U+FFFD each.
    CHECK(tok->decode(std::vector<int32_t>{243, 162}) == "\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK(tok->decode(std::vector<int32_t>{15043, 162, 3186}) == "Hello\xEF\xBF\xBD world");
    CHECK(tok->decode(std::vector<int32_t>{}).empty());
    CHECK_THROWS_AS(tok->decode(std::vector<int32_t>{32000}), TokenizerError);
    CHECK_THROWS_AS(tok->decode(std::vector<int32_t>{-1}), TokenizerError);
}

TEST_CASE("IncrementalDetokenizer gives decode()'s text, never half a character") {
    const auto tok = load(kSource + "/models/stories260K.gguf");
    for (const auto& g : read_reference_generations()) {
        std::vector<int32_t> all = g.prompt_ids;
        all.insert(all.end(), g.generated_ids.begin(), g.generated_ids.end());
        const std::string whole = tok->decode(all);
        CHECK(detokenize_stream(*tok, all) == whole);

        // Streaming after the prompt: the text that follows the prompt's.
        const std::string prompt_text = tok->decode(g.prompt_ids);
        REQUIRE(whole.starts_with(prompt_text));
        CHECK(detokenize_stream(*tok, g.generated_ids, g.prompt_ids) == whole.substr(prompt_text.size()));
    }

    // stories260K knows 253 pieces, so most of this text becomes byte tokens.
    const std::string text = "Zoë ate 🦙 crêpes: «ça», нещо, 中文 ✅ and 😶‍🌫️.";
    std::vector<int32_t> ids = tok->encode(text, true);
    CHECK(ids.size() > 40);
    CHECK(tok->decode(ids) == text);
    CHECK(detokenize_stream(*tok, ids) == text);
    for (size_t cut = 0; cut <= ids.size(); cut += 7) {
        const std::vector<int32_t> context(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
        const std::string rest = detokenize_stream(*tok, std::span(ids).subspan(cut), context);
        // The context's text, when it ends inside a character, ends in U+FFFD instead.
        std::string head = tok->decode(context);
        while (head.ends_with("\xEF\xBF\xBD")) head.resize(head.size() - 3);
        CHECK(head + rest == text);
    }
}

TEST_CASE("IncrementalDetokenizer: leading spaces, invalid bytes, flush") {
    const auto tok = load(kShared + "/vocab/ggml-vocab-llama-spm.gguf");
    CHECK(detokenize_stream(*tok, std::vector<int32_t>{29871, 15043}) == " Hello");
    CHECK(detokenize_stream(*tok, std::vector<int32_t>{15043, 3186}) == "Hello world");
    CHECK(detokenize_stream(*tok, std::vector<int32_t>{15043}, {1}) == "Hello");
    CHECK(detokenize_stream(*tok, std::vector<int32_t>{3186}, {1, 15043}) == " world");
    CHECK(detokenize_stream(*tok, std::vector<int32_t>{29871, 3186}, {1, 15043}) == "  world");

    IncrementalDetokenizer detok(*tok, {1, 15043});
    CHECK(detok.push(29871) == " ");
    CHECK(detok.push(243) == "");  // F0: the first of four bytes
    CHECK(detok.push(162) == "");
    CHECK(detok.push(169) == "");
    CHECK(detok.push(156) == "🦙");
    CHECK(detok.push(243) == "");
    CHECK(detok.flush() == "\xEF\xBF\xBD");  // a character that never finished
    CHECK(detok.flush() == "");
}

TEST_CASE("IncrementalDetokenizer::peek is what push would return, and changes nothing") {
    const auto tok = load(kShared + "/vocab/ggml-vocab-llama-spm.gguf");
    IncrementalDetokenizer detok(*tok, {1, 15043});
    CHECK(detok.peek(3186) == " world");  // decode({3186}) alone gives "world"
    CHECK(tok->decode(std::vector<int32_t>{3186}) == "world");
    CHECK(detok.peek(15043) == " Hello");
    CHECK(detok.push(3186) == " world");
    CHECK(detok.peek(243) == "");  // the first byte of a 4-byte character
    CHECK(detok.push(243) == "");
    CHECK(detok.peek(162) == "");
    CHECK(detok.push(162) == "");
    CHECK(detok.push(169) == "");
    CHECK(detok.peek(156) == "🦙");
    CHECK(detok.push(156) == "🦙");
    CHECK(detok.flush() == "");

    // Along real generations: peek(id) then push(id) agree at every step.
    for (const auto& g : read_reference_generations()) {
        IncrementalDetokenizer d(*tok, g.prompt_ids);
        for (int32_t id : g.generated_ids) {
            const std::string peeked = d.peek(id);
            CHECK(peeked == d.push(id));
        }
    }
}

namespace {

// Counts how many ids the detokenizer decodes in all.
class CountingTokenizer final : public Tokenizer {
public:
    explicit CountingTokenizer(const Tokenizer& inner) : inner_(inner) {}
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override {
        return inner_.encode(text, add_special, parse_special);
    }
    std::string decode(std::span<const int32_t> ids) const override {
        decoded_ += ids.size();
        return inner_.decode(ids);
    }
    mutable size_t decoded_ = 0;

private:
    const Tokenizer& inner_;
};

}  // namespace

TEST_CASE("IncrementalDetokenizer decodes a small window, not the whole sequence") {
    const auto tok = load(kSource + "/models/stories260K.gguf");
    const CountingTokenizer counting(*tok);
    std::vector<int32_t> ids;
    for (const auto& g : read_reference_generations())
        for (int r = 0; r < 20; ++r) ids.insert(ids.end(), g.generated_ids.begin(), g.generated_ids.end());
    REQUIRE(ids.size() > 20000);
    IncrementalDetokenizer detok(counting, {1});
    std::string text;
    for (int32_t id : ids) text += detok.push(id);
    text += detok.flush();
    CHECK(text == tok->decode(ids));
    CHECK(counting.decoded_ < 8 * ids.size());
}

TEST_CASE("from_gguf: unsupported models and bad vocabularies are clear errors") {
    {
        GGUFWriter w;
        w.set_string("tokenizer.ggml.model", "rwkv");
        w.set_string_array("tokenizer.ggml.tokens", {"a"});
        const auto bytes = w.to_bytes();
        const GGUFFile file = GGUFFile::parse(bytes);
        CHECK_THROWS_WITH_AS(Tokenizer::from_gguf(file), "tokenizer model 'rwkv' is not supported yet", TokenizerError);
    }

    const auto make = [](auto&& edit) {
        GGUFWriter w;
        w.set_string("tokenizer.ggml.model", "llama");
        std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"};
        std::vector<float> scores = {0, 0, 0, -1, -2, -3, -1.5f, -0.5f};
        std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1};
        edit(w, tokens, scores, types);
        w.set_string_array("tokenizer.ggml.tokens", tokens);
        w.set_f32_array("tokenizer.ggml.scores", scores);
        w.set_i32_array("tokenizer.ggml.token_type", types);
        return w.to_bytes();
    };
    const auto tokenizer_of = [](const std::vector<uint8_t>& bytes) {
        const GGUFFile file = GGUFFile::parse(bytes);
        return Tokenizer::from_gguf(file);
    };
    using Tokens = std::vector<std::string>;
    using Scores = std::vector<float>;
    using Types = std::vector<int32_t>;

    // A well-formed toy vocabulary.
    const auto ok = make([](GGUFWriter& w, Tokens&, Scores&, Types&) {
        w.set_u32("tokenizer.ggml.bos_token_id", 1);
        w.set_u32("tokenizer.ggml.eos_token_id", 2);
    });
    const auto toy = tokenizer_of(ok);
    CHECK(toy->encode("ab a", true) == std::vector<int32_t>{1, 3, 7, 6});
    CHECK(toy->encode("c", false) == std::vector<int32_t>{3, 0});  // no byte pieces: c is unknown
    CHECK(toy->decode(std::vector<int32_t>{1, 3, 7, 6}) == "ab a");

    // No unknown piece typed and none named: sentencepiece still needs one.
    const auto no_unk = make([](GGUFWriter&, Tokens& t, Scores&, Types& ty) {
        t[0] = "<pad>";
        ty[0] = 3;
    });
    const auto no_unk_tok = tokenizer_of(no_unk);
    CHECK(no_unk_tok->encode("ab", false) == std::vector<int32_t>{3, 7});
    CHECK_THROWS_AS(no_unk_tok->encode("c", false), TokenizerError);

    // Repeated and empty pieces are kept in place but never produced.
    const auto dup = make([](GGUFWriter&, Tokens& t, Scores& s, Types& ty) {
        t.push_back("ab");
        s.push_back(10.0f);
        ty.push_back(1);
        t.push_back("");
        s.push_back(0.0f);
        ty.push_back(1);
    });
    const auto dup_tok = tokenizer_of(dup);
    CHECK(dup_tok->vocab_size() == 10);
    CHECK(dup_tok->encode("ab", false) == std::vector<int32_t>{3, 7});

    CHECK_THROWS_WITH_AS(tokenizer_of(make([](GGUFWriter& w, Tokens&, Scores&, Types&) {
                             w.set_u32("tokenizer.ggml.bos_token_id", 99);
                         })),
                         "tokenizer.ggml.bos_token_id = 99 is out of range: the vocabulary has 8 tokens",
                         TokenizerError);
    CHECK_THROWS_WITH_AS(tokenizer_of(make([](GGUFWriter&, Tokens&, Scores& s, Types&) { s.pop_back(); })),
                         "tokenizer.ggml.scores has 7 entries but tokenizer.ggml.tokens has 8", TokenizerError);
    CHECK_THROWS_WITH_AS(tokenizer_of(make([](GGUFWriter&, Tokens&, Scores&, Types& ty) { ty[4] = 9; })),
                         "tokenizer.ggml.token_type[4] = 9 is not a token type (0..6)", TokenizerError);
    CHECK_THROWS_WITH_AS(tokenizer_of(make([](GGUFWriter&, Tokens&, Scores&, Types& ty) { ty[4] = 6; })),
                         "tokenizer.ggml.tokens[4] = 'a' has type byte but is not spelled <0xXX>",
                         TokenizerError);

    GGUFWriter empty;
    empty.set_string("general.name", "no tokenizer");
    const auto empty_bytes = empty.to_bytes();
    CHECK_THROWS_WITH_AS(tokenizer_of(empty_bytes), "the file has no tokenizer (tokenizer.ggml.model is missing)",
                         TokenizerError);
}

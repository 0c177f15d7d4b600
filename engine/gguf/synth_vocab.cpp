// The synthetic SentencePiece vocabulary (synth.h, synth_vocab).
//
// sentencepiece's BPE (what llama.cpp and our tokenizer run for
// tokenizer.ggml.model = "llama") starts from single characters and merges
// the adjacent pair whose concatenation is a piece with the highest score,
// until no pair is a piece. A piece can therefore only come out of the
// tokenizer if it can be built by such merges. We add every piece together
// with all its prefixes ("▁h", "▁he", "▁hel", ...): the leftmost symbol of a
// word is then always a prefix of it, and a prefix followed by the next
// symbol is again a prefix, so a word that is in the vocabulary always ends
// up as one token, whatever order the merges happen in. Text outside the
// vocabulary falls back to characters and then to byte tokens, so every
// string round-trips.
#include <array>
#include <string>
#include <unordered_set>

#include "engine/gguf/synth.h"

namespace minfer {

namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, a space inside a piece

// Frequent English words, most useful first: small vocabularies keep a prefix of this list.
constexpr const char* kWords[] = {
    "hello", "world", "the", "a", "and", "of", "to", "in", "is", "it", "that", "was", "he", "she", "for", "on",
    "are", "with", "as", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not", "but",
    "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how",
    "said", "an", "each", "which", "do", "their", "time", "if", "will", "way", "about", "many", "then", "them",
    "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look",
    "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know",
    "water", "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work",
    "part", "take", "get", "place", "made", "live", "where", "after", "back", "little", "only", "round", "man",
    "year", "came", "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just",
    "form", "sentence", "great", "think", "say", "help", "low", "line", "differ", "turn", "cause", "much",
    "mean", "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set", "three", "want",
    "air", "well", "also", "play", "small", "end", "put", "home", "read", "hand", "port", "large", "spell",
    "add", "even", "land", "here", "must", "big", "high", "such", "follow", "act", "why", "ask", "men",
    "change", "went", "light", "kind", "off", "need", "house", "picture", "try", "us", "again", "animal",
    "point", "mother", "near", "build", "self", "earth", "father", "head", "stand", "own", "page", "should",
    "country", "found", "answer", "school", "grow", "study", "still", "learn", "plant", "cover", "food",
    "sun", "four", "between", "state", "keep", "eye", "never", "last", "let", "thought", "city", "tree",
    "cross", "farm", "hard", "start", "might", "story", "saw", "far", "sea", "draw", "left", "late", "run",
    "while", "press", "close", "night", "real", "life", "few", "north", "open", "seem", "together", "next",
    "white", "children", "begin", "got", "walk", "example", "ease", "paper", "group", "always", "music",
    "those", "both", "mark", "often", "letter", "until", "mile", "river", "car", "feet", "care", "second",
    "book", "carry", "took", "science", "eat", "room", "friend", "began", "idea", "fish", "mountain", "stop",
    "once", "base", "hear", "horse", "cut", "sure", "watch", "color", "face", "wood", "main", "enough",
    "plain", "girl", "usual", "young", "ready", "above", "ever", "red", "list", "though", "feel", "talk",
    "bird", "soon", "body", "dog", "family", "direct", "pose", "leave", "song", "measure", "door", "product",
    "black", "short", "numeral", "class", "wind", "question", "happen", "complete", "ship", "area", "half",
    "rock", "order", "fire", "south", "problem", "piece", "told", "knew", "pass", "since", "top", "whole",
    "king", "space", "heard", "best", "hour", "better", "true", "during", "hundred", "five", "remember",
    "step", "early", "hold", "west", "ground", "interest", "reach", "fast", "verb", "sing", "listen", "six",
    "table", "travel", "less", "morning", "ten", "simple", "several", "vowel", "toward", "war", "lay",
    "against", "pattern", "slow", "center", "love", "person", "money", "serve", "appear", "road", "map",
    "rain", "rule", "govern", "pull", "cold", "notice", "voice", "unit", "power", "town", "fine", "certain",
    "fly", "fall", "lead", "cry", "dark", "machine", "note", "wait", "plan", "figure", "star", "box", "noun",
    "field", "rest", "correct", "able", "pound", "done", "beauty", "drive", "stood", "contain", "front",
    "teach", "week", "final", "gave", "green", "oh", "quick", "develop", "ocean", "warm", "free", "minute",
    "strong", "special", "mind", "behind", "clear", "tail", "produce", "fact", "street", "inch", "multiply",
    "nothing", "course", "stay", "wheel", "full", "force", "blue", "object", "decide", "surface", "deep",
    "moon", "island", "foot", "system", "busy", "test", "record", "boat", "common", "gold", "possible",
    "plane", "stead", "dry", "wonder", "laugh", "thousand", "ago", "ran", "check", "game", "shape", "equate",
    "hot", "miss", "brought", "heat", "snow", "tire", "bring", "yes", "distant", "fill", "east", "paint",
    "language", "among", "model", "token", "kernel", "engine", "batch", "cache", "memory", "thread",
};

// Syllables whose combinations fill the rest of a large vocabulary.
constexpr const char* kSyllables[] = {
    "ba", "be", "bi", "bo", "bu", "ca", "ce", "ci", "co", "cu", "da", "de", "di", "do", "du", "fa",
    "fe", "fi", "fo", "ga", "ge", "go", "ha", "he", "hi", "ho", "ka", "ki", "ko", "la", "le", "li",
    "lo", "lu", "ma", "me", "mi", "mo", "mu", "na", "ne", "ni", "no", "nu", "pa", "pe", "pi", "po",
    "ra", "re", "ri", "ro", "ru", "sa", "se", "si", "so", "ta", "te", "ti", "to", "tu", "va", "ve",
    "vi", "wa", "we", "ya", "zo", "an", "en", "in", "on", "er", "or", "ar", "al", "el", "il", "ol",
    "st", "th", "ch", "sh", "ing", "ed", "ly", "ion", "ment", "ness", "able", "ous", "est", "ist",
};

// Single characters that text is made of; anything else becomes byte tokens.
constexpr const char* kChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"-:;()[]{}<>/\\@#$%&*+=_~`^|";

class VocabBuilder {
public:
    explicit VocabBuilder(int32_t size) : size_(size) {}

    bool full() const { return static_cast<int32_t>(v_.tokens.size()) >= size_; }

    void add(const std::string& piece, float score, int32_t type) {
        if (full() || !seen_.insert(piece).second) return;
        v_.tokens.push_back(piece);
        v_.scores.push_back(score);
        v_.types.push_back(type);
    }

    // A normal piece: scores fall by one per piece, so earlier pieces merge first.
    void add_normal(const std::string& piece) { add(piece, -static_cast<float>(n_normal_++), 1); }

    // `piece` and every prefix of it (the leading U+2581 counts as one character).
    void add_with_prefixes(const std::string& piece) {
        const size_t first = piece.rfind(kSpace, 0) == 0 ? 3 : 1;
        for (size_t len = first; len <= piece.size() && !full(); ++len) add_normal(piece.substr(0, len));
    }

    SynthVocab take() { return std::move(v_); }

private:
    int32_t size_;
    int32_t n_normal_ = 0;
    SynthVocab v_;
    std::unordered_set<std::string> seen_;
};

std::string capitalized(std::string w) {
    if (!w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
    return w;
}

}  // namespace

SynthVocab synth_vocab(int32_t size) {
    VocabBuilder b(size);
    // Ids as in Llama 2's vocabulary: <unk> 0, <s> 1, </s> 2, then the bytes.
    b.add("<unk>", 0.0f, 2);
    b.add("<s>", 0.0f, 3);
    b.add("</s>", 0.0f, 3);
    for (int i = 0; i < 256; ++i) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        b.add(std::string("<0x") + kHex[i >> 4] + kHex[i & 15] + ">", 0.0f, 6);
    }

    b.add_normal(kSpace);
    for (const char* c = kChars; *c; ++c) b.add_normal(std::string(1, *c));
    // Words after a space, as they start a sentence, then inside text.
    for (const char* w : kWords) {
        b.add_with_prefixes(kSpace + std::string(w));
        b.add_with_prefixes(kSpace + capitalized(w));
    }
    for (const char* w : kWords) b.add_with_prefixes(w);
    // Made-up words of 2, 3, ... syllables until the vocabulary is full.
    constexpr size_t kNS = std::size(kSyllables);
    for (int n = 2; !b.full(); ++n) {
        std::vector<size_t> idx(static_cast<size_t>(n), 0);
        while (!b.full()) {
            std::string w;
            for (size_t i : idx) w += kSyllables[i];
            b.add_with_prefixes(kSpace + w);
            b.add_with_prefixes(w);
            size_t k = idx.size();  // next tuple, last index fastest
            while (k > 0 && ++idx[k - 1] == kNS) idx[--k] = 0;
            if (k == 0) break;
        }
    }
    return b.take();
}

}  // namespace minfer

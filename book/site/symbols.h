// Source links: `src:PATH#Symbol` names code by file and symbol, and the book
// shows it as a line range. universal-ctags finds the symbol's first and last
// line (`ctags --output-format=json --fields=+ne`).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "book/site/source_tree.h"

namespace minfer::book {

// ctags gives the line of a definition's name; its declaration may begin above
// it (`template <bool Vec>`, `__global__ void __launch_bounds__(N)` on lines of
// their own). The first line of the declaration around line `line` (1-based)
// of `text`: the lines directly above it count while they are not blank, not a
// comment or preprocessor line, and do not end something else (`;`, `{`, `}`,
// a label's `:`, a list's `,`).
int declaration_start(std::string_view text, int line);

struct SourceTarget {
    std::string path;    // repository-relative
    std::string symbol;  // as written (empty: the whole file)
    int first_line = 0;  // 1-based, inclusive; 0 when the target is the whole file
    int last_line = 0;

    // /source/PATH#Lfirst-Llast (or /source/PATH for a whole file).
    std::string url() const;
};

// One definition ctags found.
struct Tag {
    std::string name;       // block_size
    std::string qualified;  // minfer::BlockManager::block_size
    std::string kind;       // function, class, prototype, ...
    int line = 0, end = 0;
};

class SymbolIndex {
public:
    explicit SymbolIndex(const SourceTree& tree) : tree_(tree) {}

    // The text after "src:" -> its file and lines. Throws BookError for an
    // unknown file, an unknown symbol, or a symbol defined more than once in
    // the file (say which lines, so the author can qualify it).
    SourceTarget resolve(std::string_view target);

    const SourceTree& tree() const { return tree_; }

private:
    const std::vector<Tag>& tags_for(const std::string& path);

    const SourceTree& tree_;
    std::map<std::string, std::vector<Tag>> cache_;  // ctags runs once per file
};

// The definitions `symbol` names among `tags`: a bare name matches the tag's
// name; a qualified one (Scheduler::schedule) matches the end of the tag's
// scope-qualified name. Definitions win over mere declarations (prototypes).
std::vector<Tag> matching_tags(const std::vector<Tag>& tags, std::string_view symbol);

// Parses ctags' JSON lines output.
std::vector<Tag> parse_ctags_json(std::string_view output);

}  // namespace minfer::book

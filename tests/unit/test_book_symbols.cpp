// Source links: ctags' output read, symbols matched (bare, qualified,
// ambiguous), and the set of files /source/ may show.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "book/site/book_index.h"
#include "book/site/http_util.h"
#include "book/site/source_tree.h"
#include "book/site/symbols.h"
#include "book_test_repo.h"

using namespace minfer::book;
using minfer::book_test::TempRepo;
namespace fs = std::filesystem;

namespace {

// A repository with one source file: two classes, each with a schedule().
struct SchedulerRepo : TempRepo {
    explicit SchedulerRepo(const char* name)
        : TempRepo(name, {{"sched/scheduler.cpp", "namespace minfer {\n"
                                                  "struct Scheduler {\n"
                                                  "    void schedule();\n"
                                                  "};\n"
                                                  "struct Planner {\n"
                                                  "    void schedule();\n"
                                                  "};\n"
                                                  "void Scheduler::schedule() {\n"
                                                  "    int a = 0;\n"
                                                  "}\n"
                                                  "void Planner::schedule() {\n"
                                                  "}\n"
                                                  "}  // namespace minfer\n"}}) {}
};

}  // namespace

TEST_CASE("book: ctags JSON lines become tags with scope-qualified names and end lines") {
    const auto tags = parse_ctags_json(
        R"({"_type": "tag", "name": "allocate", "path": "a.h", "line": 84, "kind": "function", "scope": "minfer::BlockManager", "scopeKind": "class", "end": 90})"
        "\n"
        R"({"_type": "tag", "name": "MAX", "path": "a.h", "line": 3, "kind": "macro"})"
        "\n"
        R"({"_type": "ptag", "name": "JSON_OUTPUT_VERSION"})"
        "\n");
    REQUIRE(tags.size() == 2);
    CHECK(tags[0].qualified == "minfer::BlockManager::allocate");
    CHECK(tags[0].line == 84);
    CHECK(tags[0].end == 90);
    CHECK(tags[1].end == 3);  // no end field: one line
}

TEST_CASE("book: a bare name matches by name; a qualified one by the end of the scope") {
    std::vector<Tag> tags = {{"schedule", "minfer::Scheduler::schedule", "function", 8, 10},
                             {"schedule", "minfer::Planner::schedule", "function", 11, 12},
                             {"schedule", "minfer::Scheduler::schedule", "prototype", 3, 3}};
    CHECK(matching_tags(tags, "schedule").size() == 2);  // ambiguous: two definitions
    const auto one = matching_tags(tags, "Scheduler::schedule");
    REQUIRE(one.size() == 1);
    CHECK(one[0].line == 8);  // the definition wins over the declaration
    CHECK(matching_tags(tags, "minfer::Planner::schedule").size() == 1);
    CHECK(matching_tags(tags, "duler::schedule").empty());  // whole scope names only
    const std::vector<Tag> declared = {{"grow", "Pool::grow", "prototype", 5, 5}};
    CHECK(matching_tags(declared, "grow").size() == 1);  // a declaration when that is all there is
}

TEST_CASE("book: src: resolution through ctags: qualified, ambiguous, unknown") {
    SchedulerRepo repo("minfer_book_sym");
    SourceTree tree(repo.root, {"sched/scheduler.cpp"});
    SymbolIndex index(tree);
    const SourceTarget t = index.resolve("sched/scheduler.cpp#Scheduler::schedule");
    CHECK(t.first_line == 8);
    CHECK(t.last_line == 10);
    CHECK(t.url() == "/source/sched/scheduler.cpp#L8-L10");
    CHECK(index.resolve("sched/scheduler.cpp#Planner").first_line == 5);
    CHECK(index.resolve("sched/scheduler.cpp").url() == "/source/sched/scheduler.cpp");
    try {
        index.resolve("sched/scheduler.cpp#schedule");
        FAIL("an ambiguous symbol must not resolve");
    } catch (const BookError& e) {
        const std::string what = e.what();
        CHECK(what.find("ambiguous") != std::string::npos);
        CHECK(what.find("lines 8, 11") != std::string::npos);
    }
    CHECK_THROWS_AS(index.resolve("sched/scheduler.cpp#Nothing"), BookError);
    CHECK_THROWS_AS(index.resolve("sched/missing.cpp#Scheduler"), BookError);
    CHECK_THROWS_AS(index.resolve("sched/scheduler.cpp#"), BookError);
}

TEST_CASE("book: the source tree serves its listed files and refuses everything else") {
    SchedulerRepo repo("minfer_book_tree");
    fs::create_directories(repo.root / ".git");
    std::ofstream(repo.root / ".git" / "config") << "[core]\n";
    fs::create_symlink("/etc/passwd", repo.root / "sched" / "passwd");
    fs::create_directory_symlink("/etc", repo.root / "etc_link");
    SourceTree tree(repo.root, {"sched/scheduler.cpp", "sched/passwd", "etc_link/hostname", "missing.h"});
    CHECK(tree.files() == std::set<std::string>{"sched/scheduler.cpp"});  // symlinks and missing files dropped
    CHECK(tree.lookup("sched/scheduler.cpp") == "sched/scheduler.cpp");
    CHECK(tree.lookup("sched%2Fscheduler.cpp") == "sched/scheduler.cpp");
    for (const char* bad : {"../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "sched/../sched/scheduler.cpp",
                            "sched\\scheduler.cpp", "sched/scheduler.cpp%00", "%zz", "sched/passwd", ".git/config",
                            "etc_link/hostname", ""})
        CHECK_MESSAGE(!tree.lookup(bad), bad);
}

TEST_CASE("book: percent decoding") {
    CHECK(percent_decode("a%20b") == "a b");
    CHECK(!percent_decode("a%2"));
    CHECK(!percent_decode("%00"));
    CHECK(!percent_decode("%g0"));
}

TEST_CASE("book: a symbol's lines start at its template and qualifier lines, not at its name") {
    const std::string kernel = "// Adds.\n"                           // 1
                               "template <bool Vec>\n"                 // 2
                               "__global__ void __launch_bounds__(256)\n"  // 3
                               "    add_kernel(float* x) {\n"           // 4
                               "}\n"                                   // 5
                               "int after(int a) { return a; }\n"      // 6
                               "struct S {\n"                          // 7
                               "public:\n"                             // 8
                               "    void f();\n"                       // 9
                               "};\n";                                 // 10
    CHECK(declaration_start(kernel, 4) == 2);  // the template line, not the comment above it
    CHECK(declaration_start(kernel, 6) == 6);  // after a closing brace
    CHECK(declaration_start(kernel, 9) == 9);  // after an access label
    CHECK(declaration_start(kernel, 1) == 1);
    CHECK(declaration_start(kernel, 7) == 7);
}

// The verdict's checks as documented against kChecks (core/decide/checks.h):
// docs/formats.md and pilot-files(5) list the same names, in the same order,
// with the same words; a check added in code and not documented, or
// documented and not in code, fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/decide/checks.h"

namespace pilot {
namespace {

using NamedLines = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> Lines(const std::string& relative) {
  std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << "cannot read " << relative;
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

NamedLines CodeChecksDoc() {
  NamedLines out;
  for (const CheckInfo& c : kChecks) out.emplace_back(std::string(c.name), std::string(c.meaning));
  return out;
}

// docs/formats.md: the items "  - `name`: meaning" under "- Check names".
NamedLines FromFormats() {
  const std::vector<std::string> lines = Lines("docs/formats.md");
  NamedLines out;
  size_t i = 0;
  while (i < lines.size() && !lines[i].starts_with("- Check names")) ++i;
  EXPECT_LT(i, lines.size()) << "docs/formats.md has no \"- Check names\" item";
  for (++i; i < lines.size() && !lines[i].starts_with("- "); ++i) {
    const std::string& l = lines[i];
    if (!l.starts_with("  - `")) continue;
    const size_t end = l.find("`: ", 5);
    if (end == std::string::npos) {
      ADD_FAILURE() << "docs/formats.md: not \"  - `name`: meaning\": " << l;
      continue;
    }
    out.emplace_back(l.substr(5, end - 5), l.substr(end + 3));
  }
  return out;
}

// pilot-files(5): the ".TP" / ".B name" / meaning entries of the list after
// "Check names", up to its ".RE"; "\-" read as "-".
NamedLines FromManPage() {
  const std::vector<std::string> lines = Lines("man/pilot-files.5");
  NamedLines out;
  size_t i = 0;
  while (i < lines.size() && !lines[i].starts_with("Check names")) ++i;
  EXPECT_LT(i, lines.size()) << "pilot-files(5) has no \"Check names\" paragraph";
  for (; i < lines.size() && lines[i] != ".RE"; ++i) {
    if (lines[i] != ".TP" || i + 2 >= lines.size()) continue;
    const std::string& tag = lines[i + 1];
    if (!tag.starts_with(".B ")) {
      ADD_FAILURE() << "pilot-files(5): a check's tag is not \".B name\": " << tag;
      continue;
    }
    std::string meaning = lines[i + 2];
    for (size_t p; (p = meaning.find("\\-")) != std::string::npos;) meaning.erase(p, 1);
    out.emplace_back(tag.substr(3), meaning);
  }
  return out;
}

// Every difference between `doc` and the code, one line each.
std::vector<std::string> Differences(const NamedLines& doc) {
  const NamedLines code = CodeChecksDoc();
  std::set<std::string> in_code, in_doc;
  for (const auto& [name, _] : code) in_code.insert(name);
  for (const auto& [name, _] : doc) in_doc.insert(name);
  std::vector<std::string> out;
  for (const auto& [name, _] : code) {
    if (!in_doc.contains(name)) out.push_back(name + ": in kChecks, not documented");
  }
  for (const auto& [name, _] : doc) {
    if (!in_code.contains(name)) out.push_back(name + ": documented, not in kChecks");
  }
  if (!out.empty()) return out;
  for (size_t i = 0; i < code.size() && i < doc.size(); ++i) {
    if (code[i].first != doc[i].first) {
      out.push_back("place " + std::to_string(i + 1) + ": " + doc[i].first + " where kChecks has " +
                    code[i].first);
    } else if (code[i].second != doc[i].second) {
      out.push_back(code[i].first + ": documented as \"" + doc[i].second + "\", kChecks says \"" +
                    code[i].second + "\"");
    }
  }
  if (code.size() != doc.size()) out.push_back("a check is listed twice");
  return out;
}

TEST(ChecksDoc, NamesAreDistinctAndMeant) {
  std::set<std::string_view> seen;
  for (const CheckInfo& c : kChecks) {
    EXPECT_TRUE(seen.insert(c.name).second) << c.name << " twice in kChecks";
    EXPECT_FALSE(c.meaning.empty()) << c.name;
    EXPECT_EQ(c.meaning.find('\n'), std::string_view::npos) << c.name;
  }
  static_assert(CheckName("completed") == "completed");
}

TEST(ChecksDoc, FormatsListsKChecks) {
  for (const std::string& d : Differences(FromFormats())) ADD_FAILURE() << "docs/formats.md: " << d;
}

TEST(ChecksDoc, ManPageListsKChecks) {
  for (const std::string& d : Differences(FromManPage())) ADD_FAILURE() << "pilot-files(5): " << d;
}

// The comparison itself: a name missing, one too many, other words.
TEST(ChecksDoc, DifferencesAreFound) {
  NamedLines doc = CodeChecksDoc();
  EXPECT_TRUE(Differences(doc).empty());
  NamedLines missing(doc.begin(), doc.end() - 1);
  ASSERT_EQ(Differences(missing).size(), 1u);
  EXPECT_EQ(Differences(missing)[0], doc.back().first + ": in kChecks, not documented");
  NamedLines extra = doc;
  extra.emplace_back("made_up", "a check no code makes");
  ASSERT_EQ(Differences(extra).size(), 1u);
  EXPECT_EQ(Differences(extra)[0], "made_up: documented, not in kChecks");
  NamedLines reworded = doc;
  reworded[0].second += " and more";
  EXPECT_EQ(Differences(reworded).size(), 1u);
  NamedLines swapped = doc;
  std::swap(swapped[0], swapped[1]);
  EXPECT_EQ(Differences(swapped).size(), 2u);
}

}  // namespace
}  // namespace pilot
